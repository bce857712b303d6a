"""Peak RSS and time of auditing one big JSONL file from a local folder and from S3 (moto).

    pip install -e ".[test]" && python benchmarks/remote_memory.py 300    # size in MB

The server runs in this process on 127.0.0.1, so the S3 figures measure the plugin and
moto together, not a real S3; the point is peak RSS, which must not grow with the file.
"""
import json, logging, os, shutil, subprocess, sys, tempfile, time
from pathlib import Path

size_mb = int(sys.argv[1]) if len(sys.argv) > 1 else 200
logging.getLogger("werkzeug").setLevel(logging.ERROR)
os.environ.update(AWS_ACCESS_KEY_ID="AKIABENCHDUMMY", AWS_SECRET_ACCESS_KEY="bench-dummy-secret",
                  AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
from moto.server import ThreadedMotoServer
import boto3

tmp = Path(tempfile.mkdtemp())
(tmp / "data").mkdir()
(tmp / "pytest.ini").write_text("[pytest]\n")
line = json.dumps({"sample_id": 0, "completion_tokens": 200, "output_ids": list(range(1000, 1200))}) + "\n"
n = size_mb * (1 << 20) // len(line)
with open(tmp / "data/big.jsonl", "w") as f:
    for i in range(n):
        f.write(line.replace('"sample_id": 0', f'"sample_id": {i}', 1))
data = (tmp / "data/big.jsonl").read_bytes()
srv = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
srv.start()
host, port = srv.get_host_and_port()
ep = f"http://{host}:{port}"
os.environ["FSSPEC_S3_ENDPOINT_URL"] = ep
s3 = boto3.client("s3", endpoint_url=ep)
s3.create_bucket(Bucket="bench")
s3.put_object(Bucket="bench", Key="data/big.jsonl", Body=data)
del data
base = [sys.executable, "-m", "pytest", "--tokaudit", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
        "-o", "tokaudit_shard_size=0"]
for label, target in (("local", "data"), ("s3", "s3://bench/data/")):
    t = time.perf_counter()
    out = subprocess.run(["/usr/bin/time", "-f", "%M", *base, target], cwd=tmp, capture_output=True, text=True)
    took = time.perf_counter() - t
    rss = int(out.stderr.strip().splitlines()[-1]) // 1024
    print(f"{label}: {size_mb} MB, {n:,} records, {took:.1f} s, {size_mb / took:.0f} MB/s, peak RSS {rss} MiB, exit {out.returncode}")
srv.stop()
shutil.rmtree(tmp)
