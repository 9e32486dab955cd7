"""A small model zoo: architectures nobody here wrote, from configs, with random weights.

Each entry builds a Hugging Face `transformers` model from a tiny config (no download, no
pretrained weights) and a batch for it, the same on every call for a given seed. The zoo test
(tests/test_model_zoo.py) runs them on the device against the CPU; benchmarks/bench_zoo.py times
their eager forward.

Why no timm: timm imports torchvision when it is imported (`timm.data` loads torchvision's
transforms, `timm.layers` its FrozenBatchNorm2d) and lists it as a hard requirement, at every
release. The torchvision wheels on the package index are built against torch's CUDA build and
fail to import beside torch 2.13.0+cpu ("operator torchvision::nms does not exist"); a
torchvision built for the CPU build is not on the index. So the vision architectures the issue
names come from transformers' own implementations instead: ResNet, ConvNeXt, EfficientNet and
ViT are the same architectures; MobileNetV2 stands in for MobileNetV3 (inverted residuals,
depthwise convolutions and BatchNorm alike; no hardswish or squeeze-excite, which EfficientNet
has in its swish form).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

VISION = ("resnet", "mobilenet_v2", "efficientnet", "convnext", "vit")
TEXT = ("gpt2", "llama", "mistral", "bert", "t5")
NAMES = VISION + TEXT
_VOCAB = 96


@dataclass(frozen=True)
class ZooModel:
    name: str
    family: str  # "cnn" or "transformer" (what the speed targets of bench_zoo.py refer to)
    build: Callable[[], torch.nn.Module]  # random weights, dropout off
    batch: Callable[[], dict]  # keyword arguments of forward, on the CPU


# Sizes: "test" keeps every model tiny (the zoo test compiles them on a 2-core CI machine);
# "bench" (benchmarks/bench_zoo.py) is 4x as wide with larger inputs, small models still, where
# the work per op is no longer negligible next to the Python that every op costs a device.
SIZES = {
    "test": {"width": 1, "batch": 2, "image": 32, "tokens": 12},
    "bench": {"width": 4, "batch": 4, "image": 64, "tokens": 64},
}


def _builders(size: str) -> dict:
    import transformers as T  # noqa: N812  (imported here: mtia_lab itself does not need it)

    if size not in SIZES:
        raise ValueError(f"unknown zoo size {size!r}; use one of {', '.join(SIZES)}")
    w, batch, side, tokens = (SIZES[size][k] for k in ("width", "batch", "image", "tokens"))

    def image() -> dict:
        return {"pixel_values": torch.randn(batch, 3, side, side)}

    def text_batch() -> dict:
        return {"input_ids": torch.randint(0, _VOCAB, (batch, tokens))}

    def seq2seq() -> dict:
        return {
            "input_ids": torch.randint(0, _VOCAB, (batch, tokens)),
            "decoder_input_ids": torch.randint(0, _VOCAB, (batch, tokens * 2 // 3)),
        }

    text = {"vocab_size": _VOCAB, "max_position_embeddings": max(32, tokens)}
    decoder = {
        **text, "hidden_size": 32 * w, "intermediate_size": 64 * w, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "bos_token_id": 1, "eos_token_id": 2,
        "pad_token_id": 0,
    }
    return {
        "resnet": ("cnn", lambda: T.ResNetForImageClassification(T.ResNetConfig(
            embedding_size=16 * w, hidden_sizes=[16 * w, 32 * w], depths=[1, 1],
            layer_type="basic", num_labels=10)), image),
        "mobilenet_v2": ("cnn", lambda: T.MobileNetV2ForImageClassification(T.MobileNetV2Config(
            depth_multiplier=0.35 * w, image_size=side, num_labels=10,
            classifier_dropout_prob=0.0)), image),
        "efficientnet": ("cnn", lambda: T.EfficientNetForImageClassification(T.EfficientNetConfig(
            image_size=side, width_coefficient=0.25 * w, depth_coefficient=0.25,
            hidden_dim=320 * w, num_labels=10, dropout_rate=0.0, drop_connect_rate=0.0)), image),
        "convnext": ("cnn", lambda: T.ConvNextForImageClassification(T.ConvNextConfig(
            num_stages=2, hidden_sizes=[16 * w, 32 * w], depths=[1, 1], num_labels=10)), image),
        "vit": ("transformer", lambda: T.ViTForImageClassification(T.ViTConfig(
            image_size=side, patch_size=8, hidden_size=32 * w, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=64 * w, num_labels=10)), image),
        "gpt2": ("transformer", lambda: T.GPT2LMHeadModel(T.GPT2Config(
            vocab_size=_VOCAB, n_positions=max(32, tokens), n_embd=32 * w, n_layer=2, n_head=2,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1, eos_token_id=2)),
            text_batch),
        "llama": ("transformer", lambda: T.LlamaForCausalLM(T.LlamaConfig(**decoder)),
                  text_batch),
        "mistral": ("transformer", lambda: T.MistralForCausalLM(T.MistralConfig(
            **decoder, sliding_window=8)), text_batch),
        "bert": ("transformer", lambda: T.BertForMaskedLM(T.BertConfig(
            **text, hidden_size=32 * w, intermediate_size=64 * w, num_hidden_layers=2,
            num_attention_heads=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
            text_batch),
        "t5": ("transformer", lambda: T.T5ForConditionalGeneration(T.T5Config(
            vocab_size=_VOCAB, d_model=32 * w, d_ff=64 * w, d_kv=16 * w, num_layers=2,
            num_heads=2, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0)), seq2seq),
    }


def zoo_model(name: str, size: str = "test") -> ZooModel:
    """The zoo entry `name` (one of NAMES) at `size` (one of SIZES)."""
    builders = _builders(size)
    if name not in builders:
        raise ValueError(f"unknown zoo model {name!r}; the zoo has {', '.join(NAMES)}")
    family, build, batch = builders[name]
    return ZooModel(name, family, build, batch)


def build(name: str, seed: int = 0, size: str = "test") -> tuple[torch.nn.Module, dict]:
    """(model, batch) of zoo model `name`: random weights and inputs from `seed`, on the CPU."""
    entry = zoo_model(name, size)
    torch.manual_seed(seed)
    model = entry.build()
    return model, entry.batch()


def logits(output) -> torch.Tensor:
    """The tensor a zoo model's forward is judged by (its `logits`)."""
    return output.logits
