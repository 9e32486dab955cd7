"""TUNING graphs built from `transformers` module code (other models than the held-out suite's,
tests/fidelity_heldout.py): part of the suite the rules were changed against."""

import torch
from fidelity_heldout import _eval, _r


def _wav2vec2_feature_encoder():
    from transformers import Wav2Vec2Config
    from transformers.models.wav2vec2.modeling_wav2vec2 import Wav2Vec2FeatureEncoder

    cfg = Wav2Vec2Config(conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                         feat_extract_norm="group", conv_bias=False)
    encoder = _eval(Wav2Vec2FeatureEncoder(cfg))
    return (lambda wave: encoder(wave)), lambda: (_r(2, 400),)


def _whisper_encoder_layer():
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoderLayer

    layer = _eval(WhisperEncoderLayer(WhisperConfig(
        d_model=32, encoder_attention_heads=4, encoder_ffn_dim=64,
        attn_implementation="eager")))

    def whisper_layer(x):
        out = layer(x, attention_mask=None)
        return out[0] if isinstance(out, tuple) else out

    return whisper_layer, lambda: (_r(2, 8, 32),)


def _swin_patch_merging():
    from transformers.models.swin.modeling_swin import SwinPatchMerging

    merge = _eval(SwinPatchMerging(16))
    return (lambda x: merge(x, (8, 8))), lambda: (_r(2, 64, 16),)


def _gemma_norm_mlp():
    from transformers import GemmaConfig
    from transformers.models.gemma.modeling_gemma import GemmaMLP, GemmaRMSNorm

    cfg = GemmaConfig(hidden_size=32, intermediate_size=64, hidden_act="gelu_pytorch_tanh")
    norm, mlp = _eval(GemmaRMSNorm(32)), _eval(GemmaMLP(cfg))
    return (lambda x: x + mlp(norm(x))), lambda: (_r(2, 8, 32),)


_BUILDERS = {
    "wav2vec2_features": _wav2vec2_feature_encoder,
    "whisper_encoder_layer": _whisper_encoder_layer,
    "swin_patch_merging": _swin_patch_merging,
    "gemma_norm_mlp": _gemma_norm_mlp,
}


def tuning_hf_graphs() -> dict:
    """{name: (fn, make_inputs)}, modules built (with seeded weights) on first call."""
    torch.manual_seed(0)
    return {name: build() for name, build in _BUILDERS.items()}
