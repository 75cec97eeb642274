"""``SGLANG_EXTERNAL_MODEL_PACKAGE`` target: SGLang registers every ``EntryClass`` here by class name.

Only imported inside an SGLang server (it imports ``sglang``); see :mod:`.qwen_vl`.
"""
