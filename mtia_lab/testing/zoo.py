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


def _image() -> dict:
    return {"pixel_values": torch.randn(2, 3, 32, 32)}


def _tokens() -> dict:
    return {"input_ids": torch.randint(0, _VOCAB, (2, 12))}


def _seq2seq() -> dict:
    return {
        "input_ids": torch.randint(0, _VOCAB, (2, 12)),
        "decoder_input_ids": torch.randint(0, _VOCAB, (2, 8)),
    }


def _builders() -> dict[str, tuple[str, Callable[[], torch.nn.Module], Callable[[], dict]]]:
    import transformers as T  # noqa: N812  (imported here: mtia_lab itself does not need it)

    text = {"vocab_size": _VOCAB, "max_position_embeddings": 32}
    decoder = {
        **text, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "bos_token_id": 1, "eos_token_id": 2,
        "pad_token_id": 0,
    }
    return {
        "resnet": ("cnn", lambda: T.ResNetForImageClassification(T.ResNetConfig(
            embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic",
            num_labels=10)), _image),
        "mobilenet_v2": ("cnn", lambda: T.MobileNetV2ForImageClassification(T.MobileNetV2Config(
            depth_multiplier=0.35, image_size=32, num_labels=10, classifier_dropout_prob=0.0)),
            _image),
        "efficientnet": ("cnn", lambda: T.EfficientNetForImageClassification(T.EfficientNetConfig(
            image_size=32, width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=320,
            num_labels=10, dropout_rate=0.0, drop_connect_rate=0.0)), _image),
        "convnext": ("cnn", lambda: T.ConvNextForImageClassification(T.ConvNextConfig(
            num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], num_labels=10)), _image),
        "vit": ("transformer", lambda: T.ViTForImageClassification(T.ViTConfig(
            image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=64, num_labels=10)), _image),
        "gpt2": ("transformer", lambda: T.GPT2LMHeadModel(T.GPT2Config(
            vocab_size=_VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1, eos_token_id=2)), _tokens),
        "llama": ("transformer", lambda: T.LlamaForCausalLM(T.LlamaConfig(**decoder)), _tokens),
        "mistral": ("transformer", lambda: T.MistralForCausalLM(T.MistralConfig(
            **decoder, sliding_window=8)), _tokens),
        "bert": ("transformer", lambda: T.BertForMaskedLM(T.BertConfig(
            **text, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
            _tokens),
        "t5": ("transformer", lambda: T.T5ForConditionalGeneration(T.T5Config(
            vocab_size=_VOCAB, d_model=32, d_ff=64, d_kv=16, num_layers=2, num_heads=2,
            dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0)), _seq2seq),
    }


def zoo_model(name: str) -> ZooModel:
    """The zoo entry `name` (one of NAMES)."""
    builders = _builders()
    if name not in builders:
        raise ValueError(f"unknown zoo model {name!r}; the zoo has {', '.join(NAMES)}")
    family, build, batch = builders[name]
    return ZooModel(name, family, build, batch)


def build(name: str, seed: int = 0) -> tuple[torch.nn.Module, dict]:
    """(model, batch) of zoo model `name`: random weights and inputs from `seed`, on the CPU."""
    entry = zoo_model(name)
    torch.manual_seed(seed)
    model = entry.build()
    return model, entry.batch()


def logits(output) -> torch.Tensor:
    """The tensor a zoo model's forward is judged by (its `logits`)."""
    return output.logits
