"""``SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE`` target (imported with ``overwrite=True``, replacing SGLang's
Qwen-VL processor for the architectures it lists). Only imported inside an SGLang server."""
