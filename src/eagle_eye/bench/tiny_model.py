"""Write a tiny random-weight Llama model plus tokenizer that vLLM's CPU build can serve.

Nothing comes from a model hub: a byte-level BPE tokenizer is trained on a few lines of
built-in text and the weights are random (fixed seed), so the same files come out on
every machine. Run with the vLLM virtualenv's python (it has torch, transformers and
tokenizers):

    python tiny_model.py OUT_DIR     (eagle_eye.bench.vllm_server.ensure_tiny_model does this)

head_dim is 32 because the CPU attention backend supports only some head sizes (16 starts
but kills the engine on the first request).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SEED = 20260101
VOCAB_SIZE = 1024
ARCHITECTURE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "max_position_embeddings": 512,
}
"""``LlamaConfig`` arguments of the tiny model (also used for weightless vLLM configs)."""
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}</s>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
_CORPUS = [
    "Hello AI, how are you today?",
    "Eagle Eye publishes per-step engine metrics over NATS for routing.",
    "The router picks the engine with the fewest waiting requests.",
    "KV cache usage, running and waiting requests, time to first token.",
    "The quick brown fox jumps over the lazy dog. 0123456789",
    "Large language model inference fleets need fresh load signals.",
]


def main(out_dir: str) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_CORPUS * 20, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)

    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=len(fast),
        **ARCHITECTURE,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=True,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(out, safe_serialization=True)
    # vLLM reads the generation config; keep sampling defaults neutral.
    (out / "generation_config.json").write_text(
        json.dumps({"bos_token_id": fast.bos_token_id, "eos_token_id": fast.eos_token_id})
    )


if __name__ == "__main__":
    main(sys.argv[1])
