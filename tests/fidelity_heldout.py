"""The HELD-OUT fidelity suite: blocks of real models, built from the module code of the
`transformers` library with tiny configs (not written for this project, and never looked at
graph by graph while the scheduler's rules were changed; see tests/fidelity_graphs.py for the
suites used to tune). Each entry: a function of tensors and a maker of small CPU inputs."""

import torch


def _r(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


def _eval(module: torch.nn.Module) -> torch.nn.Module:
    """Inference: eval mode, weights frozen, on the device (weights become graph inputs)."""
    torch.manual_seed(0)
    return module.eval().requires_grad_(False).to("mtia_sim")


def _first(out):
    """A model layer's first output (layers return a tuple of hidden states and extras)."""
    return out[0] if isinstance(out, tuple) else out


def _positions(batch: int, length: int) -> torch.Tensor:
    return torch.arange(length).expand(batch, length).contiguous()


def _causal_mask(length: int, dtype: torch.dtype, device) -> torch.Tensor:
    """The additive causal mask a model's mask utilities build: 0 on and below the diagonal."""
    causal = torch.ones(length, length, dtype=torch.bool, device=device).triu(1)
    return torch.where(causal, torch.finfo(dtype).min, 0.0).to(dtype)[None, None]


def _llama_layer():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_attention_heads=4,
                      num_key_value_heads=2, num_hidden_layers=1, vocab_size=64,
                      attn_implementation="eager")
    layer, rope = _eval(LlamaDecoderLayer(cfg, 0)), _eval(LlamaRotaryEmbedding(cfg))

    def llama_layer(x, position_ids):
        return layer(x, position_embeddings=rope(x, position_ids), attention_mask=None)

    return llama_layer, lambda: (_r(2, 8, 32), torch.arange(8).expand(2, 8).contiguous())


def _gpt2_block():
    from transformers import GPT2Config
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    block = _eval(GPT2Block(GPT2Config(n_embd=32, n_head=4, n_layer=1, n_positions=16,
                                       attn_implementation="eager")))

    def gpt2_block(x):
        return block(x)[0] if isinstance(block(x), tuple) else block(x)

    return gpt2_block, lambda: (_r(2, 8, 32),)


def _bert_layer():
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertLayer

    layer = _eval(BertLayer(BertConfig(hidden_size=32, num_attention_heads=4,
                                       intermediate_size=64, attn_implementation="eager")))

    def bert_layer(x):
        out = layer(x)
        return out[0] if isinstance(out, tuple) else out

    return bert_layer, lambda: (_r(2, 8, 32),)


def _convnext_layer():
    from transformers import ConvNextConfig
    from transformers.models.convnext.modeling_convnext import ConvNextLayer

    layer = _eval(ConvNextLayer(ConvNextConfig(), dim=16))
    return (lambda x: layer(x)), lambda: (_r(2, 16, 8, 8),)


def _resnet_bottleneck():
    from transformers.models.resnet.modeling_resnet import ResNetBottleNeckLayer

    layer = _eval(ResNetBottleNeckLayer(16, 32, stride=1, reduction=4))
    return (lambda x: layer(x)), lambda: (_r(2, 16, 8, 8),)


def _vit_embeddings_layer():
    from transformers import ViTConfig
    from transformers.models.vit.modeling_vit import ViTEmbeddings, ViTLayer

    cfg = ViTConfig(hidden_size=32, num_attention_heads=4, intermediate_size=64, image_size=16,
                    patch_size=4, num_channels=3, attn_implementation="eager")
    emb, layer = _eval(ViTEmbeddings(cfg)), _eval(ViTLayer(cfg))

    def vit(pixels):
        out = layer(emb(pixels))
        return out[0] if isinstance(out, tuple) else out

    return vit, lambda: (_r(2, 3, 16, 16),)


def _t5_ff_and_norm():
    from transformers import T5Config
    from transformers.models.t5.modeling_t5 import T5LayerFF

    ff = _eval(T5LayerFF(T5Config(d_model=32, d_ff=64, feed_forward_proj="gated-gelu")))
    return (lambda x: ff(x)), lambda: (_r(2, 8, 32),)


def _clip_loss():
    from transformers.models.clip.modeling_clip import (
        _get_vector_norm,
        image_text_contrastive_loss,
    )

    def clip_contrastive(image_embeds, text_embeds, logit_scale):  # CLIPModel.forward's tail
        image_embeds = image_embeds / _get_vector_norm(image_embeds)
        text_embeds = text_embeds / _get_vector_norm(text_embeds)
        logits = text_embeds @ image_embeds.t() * logit_scale.exp()
        return image_text_contrastive_loss(logits)

    return clip_contrastive, lambda: (_r(8, 16), _r(8, 16), torch.tensor(2.0))


def _top_k_top_p():
    from transformers.generation.logits_process import (
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    warpers = [TemperatureLogitsWarper(0.7), TopKLogitsWarper(8), TopPLogitsWarper(0.9)]

    def sample_filter(input_ids, scores):
        for warp in warpers:
            scores = warp(input_ids, scores)
        return torch.softmax(scores, -1)

    return sample_filter, lambda: (torch.zeros(2, 4, dtype=torch.long), _r(2, 64))


def _repetition_penalty():
    from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

    proc = RepetitionPenaltyLogitsProcessor(1.3)
    return (lambda ids, scores: torch.log_softmax(proc(ids, scores), -1)), lambda: (
        torch.randint(0, 64, (2, 6)), _r(2, 64))


def _mobilenet_v2_block():
    from transformers import MobileNetV2Config
    from transformers.models.mobilenet_v2.modeling_mobilenet_v2 import (
        MobileNetV2InvertedResidual,
    )

    block = _eval(MobileNetV2InvertedResidual(MobileNetV2Config(), 16, 16, stride=1))
    return (lambda x: block(x)), lambda: (_r(2, 16, 8, 8),)


def _mixtral_router():
    from transformers import MixtralConfig
    from transformers.models.mixtral.modeling_mixtral import MixtralTopKRouter

    cfg = MixtralConfig(hidden_size=32, num_local_experts=8, num_experts_per_tok=2)
    torch.manual_seed(0)
    router = MixtralTopKRouter(cfg)
    torch.nn.init.normal_(router.weight, std=0.2)  # the module leaves it uninitialized
    router = _eval(router)
    return (lambda x: router(x)), lambda: (_r(2, 8, 32),)


_BUILDERS = {
    "llama_layer": _llama_layer,
    "gpt2_block": _gpt2_block,
    "bert_layer": _bert_layer,
    "convnext_layer": _convnext_layer,
    "resnet_bottleneck": _resnet_bottleneck,
    "vit_patch_layer": _vit_embeddings_layer,
    "t5_gated_ff": _t5_ff_and_norm,
    "clip_loss": _clip_loss,
    "top_k_top_p": _top_k_top_p,
    "repetition_penalty": _repetition_penalty,
    "mobilenet_v2_block": _mobilenet_v2_block,
    "mixtral_router": _mixtral_router,
}


def heldout_graphs() -> dict:
    """{name: (fn, make_inputs)}, modules built (with seeded weights) on first call."""
    return {name: build() for name, build in _BUILDERS.items()}


INDUCTOR_CONFIG: dict = {}
