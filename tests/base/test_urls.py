"""URLs as shown: no user:password@, no credential parameter's value, whatever the protocol."""

from __future__ import annotations

import pytest

from pytest_tokaudit.base.urls import display_url, scrub

SECRETS = ("hunter2pw", "AKIAQWERTY", "deadbeef99", "sessiontok77", "azuresig55", "goog66sig")

URLS = [
    "https://alice:hunter2pw@example.com/m.jsonl?X-Amz-Credential=AKIAQWERTY%2F2025&"
    "X-Amz-Signature=deadbeef99&X-Amz-Security-Token=sessiontok77",
    "s3://alice:hunter2pw@bucket/m.jsonl",
    "s3://bucket/m.jsonl?X-Amz-Signature=deadbeef99&X-Amz-Credential=AKIAQWERTY&"
    "X-Amz-Security-Token=sessiontok77",
    "az://container/blob.jsonl?sv=2022-11-02&se=2030-01-01&sp=r&sig=azuresig55",
    "abfs://token:hunter2pw@container/blob.jsonl?sig=azuresig55",
    "gs://bucket/m.jsonl?X-Goog-Signature=goog66sig&x-goog-credential=AKIAQWERTY",
    "hf://datasets/org/x/m.jsonl?token=sessiontok77",
    "https://account.blob.core.windows.net/c/m.jsonl?sv=2022&sig=azuresig55",
]


@pytest.mark.parametrize("url", URLS)
def test_a_url_is_shown_without_its_credentials(url: str):
    shown = display_url(url)
    assert not any(s in shown for s in SECRETS), shown
    assert shown.split("://")[0] == url.split("://")[0]
    assert "m.jsonl" in shown or "blob.jsonl" in shown
    # The same URL inside a message (an error that quotes it) is scrubbed too.
    text = scrub(f"cannot read {url}: no such file")
    assert not any(s in text for s in SECRETS), text
    assert text.endswith(": no such file"), text


def test_what_is_not_a_credential_stays():
    assert display_url("s3://bucket/a.jsonl?versionId=3Lg") == "s3://bucket/a.jsonl?versionId=3Lg"
    assert display_url("s3://bucket/a::b.jsonl") == "s3://bucket/a::b.jsonl"
    assert display_url("az://c/b?sv=2022&sig=x") == "az://c/b?sv=2022&sig=***"
    assert scrub("no such file or bucket") == "no such file or bucket"
