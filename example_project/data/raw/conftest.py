"""Raw API responses (OpenRouter's shape): text and usage, no token ids. The ids are rebuilt
from the text with the Qwen3 tokenizer; every check of pytest.ini runs on them."""


def pytest_tokaudit_contract(path, contract):
    return contract.replace(
        id_field="id",
        count_field="usage.completion_tokens",  # OpenRouter's count includes the reasoning
        text_template="{choices.0.message.reasoning?}</think>{choices.0.message.content}<|im_end|>",
        finish_reason="stop",
        count_outlier_max="25%",  # a response billed twice is never an allowed outlier
    )
