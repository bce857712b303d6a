"""Toy remote-code tokenizer in the shape of Kimi-K2's tokenization_kimi.py:
a transformers slow PreTrainedTokenizer over a tiktoken.Encoding loaded from
`tiktoken.model`, special tokens placed after the base vocabulary.

Written for research (pytest-tokaudit); mirrors the *behaviour* of the Kimi file:
  * encode(text) -> self.model.encode(text, allowed_special="all")   (literal "</think>" -> special id)
  * encode(text, **kwargs) logs a warning and defers to PreTrainedTokenizer.encode
"""
import os
from typing import Dict, List, Optional, Tuple, Union

import tiktoken
from tiktoken.load import load_tiktoken_bpe
from transformers import PreTrainedTokenizer
from transformers.utils import logging

logger = logging.get_logger(__name__)
VOCAB_FILES_NAMES = {"vocab_file": "tiktoken.model"}


def _bytes_to_unicode() -> Dict[int, str]:
    # transformers 5 no longer exports bytes_to_unicode from models.gpt2.tokenization_gpt2
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class ToyTikTokenizer(PreTrainedTokenizer):
    vocab_files_names = VOCAB_FILES_NAMES
    model_input_names = ["input_ids", "attention_mask"]

    # Qwen2/3 split regex (the rank file is the Qwen3 vocabulary)
    pat_str = (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+"
    )
    num_reserved_special_tokens = 26  # Qwen3 has 26 added tokens at 151643..151668

    def __init__(
        self,
        vocab_file,
        bos_token=None,
        eos_token="<|im_end|>",
        unk_token=None,
        pad_token="<|endoftext|>",
        additional_special_tokens=None,
        added_tokens_decoder: Optional[dict] = None,
        **kwargs,
    ):
        assert os.path.isfile(vocab_file), vocab_file
        added_tokens_decoder = added_tokens_decoder or {}
        names = {int(i): (t.content if hasattr(t, "content") else str(t)) for i, t in added_tokens_decoder.items()}

        self.vocab_file = vocab_file
        mergeable_ranks = load_tiktoken_bpe(vocab_file)  # as Kimi does (NB: caches a copy keyed by sha1(path))
        n_base = len(mergeable_ranks)
        # Kimi: every id in [n_base, n_base + reserved) is a special token, named from
        # added_tokens_decoder or "<|reserved_token_{i}|>"
        self.special_tokens = {
            names.get(i, f"<|reserved_token_{i}|>"): i
            for i in range(n_base, n_base + self.num_reserved_special_tokens)
        }
        self.model = tiktoken.Encoding(
            name=os.path.basename(vocab_file),
            pat_str=self.pat_str,
            mergeable_ranks=mergeable_ranks,
            special_tokens=self.special_tokens,
        )
        self.n_words = self.model.n_vocab
        self.byte_encoder = _bytes_to_unicode()
        self.byte_decoder = {v: k for k, v in self.byte_encoder.items()}
        self.decoder = {
            i: "".join(self.byte_encoder[b] for b in self.model.decode_single_token_bytes(i))
            for i in range(self.n_words)
        }
        self.encoder = {v: k for k, v in self.decoder.items()}
        self.unk_id = self.special_tokens.get(str(unk_token)) if unk_token else None

        super().__init__(
            bos_token=bos_token,
            eos_token=eos_token,
            unk_token=unk_token,
            pad_token=pad_token,
            additional_special_tokens=additional_special_tokens,
            added_tokens_decoder=added_tokens_decoder,
            **kwargs,
        )

    def encode(self, text: str, allow_special_tokens: bool = True, **kwargs) -> List[int]:
        if len(kwargs) > 0:
            logger.warning(f"Calling super().encode with {kwargs}")
            return super().encode(text, **kwargs)
        assert type(text) is str
        if allow_special_tokens:
            return self.model.encode(text, allowed_special="all")
        return self.model.encode(text, disallowed_special=())

    def decode(self, token_ids: Union[int, List[int]], **kwargs) -> str:
        if len(kwargs) > 0:
            return super().decode(token_ids, **kwargs)
        if type(token_ids) is int:
            token_ids = [token_ids]
        return self.model.decode(token_ids)

    @property
    def vocab_size(self) -> int:
        return self.n_words

    def get_vocab(self) -> Dict[str, int]:
        return self.encoder

    def _tokenize(self, text: str, **kwargs) -> List[str]:
        return [self.decoder[t] for t in self.encode(text)]

    def _convert_token_to_id(self, token: str) -> int:
        return self.encoder.get(token, self.unk_id)

    def _convert_id_to_token(self, index: int) -> str:
        return self.decoder.get(index)

    def convert_tokens_to_string(self, tokens: List[str]) -> str:
        return bytearray(self.byte_decoder[c] for c in "".join(tokens)).decode("utf-8", "replace")

    def save_vocabulary(self, save_directory: str, filename_prefix: Optional[str] = None) -> Tuple[str]:
        import shutil
        out = os.path.join(save_directory, (filename_prefix + "-" if filename_prefix else "") + "tiktoken.model")
        if os.path.abspath(self.vocab_file) != os.path.abspath(out):
            shutil.copyfile(self.vocab_file, out)
        return (out,)
