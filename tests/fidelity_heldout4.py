"""The FOURTH HELD-OUT fidelity suite, written blind: committed before any comparison was run on
it, by someone who was not tuning the scheduler, so that the engineer who tunes on HELD-OUT-3
has a suite nobody has looked at to measure on.

Blocks, heads and losses of real models built from the module code of `transformers` with tiny
configs and seeded random weights, from families used in none of the other suites
(fidelity_graphs, fidelity_tuning_hf, fidelity_heldout, fidelity_heldout2, fidelity_heldout3;
GPT-NeoX is left out because fidelity_graphs has a rotary attention written in its style).
Chosen for what real models contain, before anything was measured:

- opt_decoder_layer_bf16: OPT's decoder layer in bfloat16, pre-LN, biased projections, a
  causal additive mask, a ReLU MLP.
- bart_decoder_layer: BART's decoder layer, post-LN, causal self-attention then cross-attention
  on encoder states under a padding mask expanded as transformers' `_expand_mask` does, GELU
  MLP.
- persimmon_layer: Persimmon's layer, LayerNorm on queries and keys per head, rotary on half of
  each head (partial rotary, a slice and a cat), squared-ReLU MLP.
- olmo2_layer_bf16: OLMo-2's layer in bfloat16, RMSNorm (in float32) on the whole query and key
  projections, norms after attention and MLP rather than before, SwiGLU.
- nystromformer_layer: Nystromformer's landmark attention, segment means as landmarks, the
  iterative Moore-Penrose pseudo-inverse (a chain of matmuls), a depthwise convolution on the
  values added to the output.
- convbert_layer: ConvBERT's mixed attention, half the heads span-based dynamic convolution (a
  separable conv1d, a kernel predicted per position, unfold), half self-attention.
- pvt_v2_block: PVTv2's block, spatial-reduction attention (keys and values from a strided
  convolution and a LayerNorm), an MLP with a depthwise 3x3 convolution between its linears.
- upernet_head: UperNet's decode head, a pyramid pooling module (adaptive average pools at
  four scales, bilinear upsampling, cat), an FPN top-down path, convolutions with BatchNorm and
  ReLU, a classifier.
- dpt_fusion_layer: DPT's feature fusion, pre-activation residual units (ReLU, 3x3 conv) on two
  inputs, a bilinear upsample with align_corners, a 1x1 projection.
- olmoe_block: OLMoE's sparse block, softmax top-k routing without renormalization, experts
  as gathered 3-D weights (transformers' "batched_mm" experts, the compilable one).
- conformer_encoder: FastSpeech2-Conformer's encoder layer, macaron half-step feed-forwards
  made of conv1d, relative-position self-attention (sinusoidal table sliced around its centre,
  positional bias terms, the Transformer-XL shift of the scores by a pad and a reshape), the
  convolution module (pointwise conv, GLU, depthwise conv1d, BatchNorm, Swish), a final norm.
- electra_discriminator_loss: ELECTRA's replaced-token-detection head (dense, GELU, a one-unit
  projection squeezed) and its BCE-with-logits loss, as ElectraForPreTraining without a mask.
- recurrent_gemma_recurrent_block: Griffin's recurrent block, a causal depthwise conv1d, the
  RG-LRU gates (block-diagonal baddbmm, softplus, exp), a reset at position 0 and the linear
  recurrence unrolled over the sequence, a GELU-tanh gate.

All fourteen (these thirteen and sam_two_way_block below, in the suite since the
attribution places its `_safe_softmax` launches) compile on both paths
(fullgraph) and match eager on the device, ours and Inductor's (OLMo-2 in bfloat16 within two
bfloat16 ulps on Inductor's side, as stock CPU Inductor also differs from eager there: it keeps
float32 between ops). Two first chosen were replaced or changed before any comparison: EnCodec's
residual block (its convolutions pad by amounts held in tensor buffers,
`_get_extra_padding_for_conv1d`: data-dependent, no fullgraph graph on either path) by the
Conformer encoder; BART's cross-attention mask is expanded as transformers' `_expand_mask` does,
because that helper warns on every call and Dynamo cannot trace the warning.

- sam_two_way_block: SAM's mask-decoder two-way block, token self-attention, token-to-image
  and image-to-token cross-attention with a downsampled inner width, point embeddings added to
  queries and keys, LayerNorms and a ReLU MLP. First kept out (NOT_ALIGNED): its audit failed
  on "launch 6 (triton_poi_fused__safe_softmax_view_3) computes nothing of ours" (and launch
  42). Inductor's attention pattern pass rewrites SAM's eager attention (bmm, scale, softmax,
  bmm; no mask) to SDPA, whose math decomposition uses `_safe_softmax`; the row check it adds
  (any score != -inf) becomes a launch of its own whose nodes the pattern made, none from ours.
  The attribution now places it on the nodes of ours its reader holds (compare/launches.py
  `_completed_by_reader`), counted as a post_grad_pattern difference, and SAM is compared.

Each entry: a function of tensors and a maker of small CPU inputs. Do not change the
scheduler's rules while looking at these graphs: the figure is only honest while no rule was
tuned against them."""

import torch
from fidelity_heldout import _causal_mask, _eval, _first, _positions, _r


def _padding_mask(mask: torch.Tensor, dtype: torch.dtype, target_length: int) -> torch.Tensor:
    """transformers' AttentionMaskConverter._expand_mask, [batch, source] of 1/0 to the additive
    [batch, 1, target, source] (copied: the helper warns on every call, which Dynamo rejects)."""
    expanded = mask[:, None, None, :].expand(mask.shape[0], 1, target_length,
                                             mask.shape[1]).to(dtype)
    inverted = torch.tensor(1.0, dtype=dtype) - expanded
    return inverted.masked_fill(inverted.to(torch.bool), torch.finfo(dtype).min)


def _normal_init(module: torch.nn.Module) -> torch.nn.Module:
    """Seeded N(0, 0.2) weights, for modules that leave parameters uninitialized."""
    torch.manual_seed(0)
    for p in module.parameters():
        torch.nn.init.normal_(p, std=0.2)
    return module


def _opt_decoder_layer_bf16():
    from transformers import OPTConfig
    from transformers.models.opt.modeling_opt import OPTDecoderLayer

    cfg = OPTConfig(hidden_size=32, num_attention_heads=4, ffn_dim=64, word_embed_proj_dim=32,
                    do_layer_norm_before=True, enable_bias=True, attn_implementation="eager")
    layer = _eval(OPTDecoderLayer(cfg, layer_idx=0)).to(torch.bfloat16)

    def opt_layer(x):
        return _first(layer(x, attention_mask=_causal_mask(x.shape[1], x.dtype, x.device)))

    return opt_layer, lambda: (_r(2, 8, 32, dtype=torch.bfloat16),)


def _bart_decoder_layer():
    from transformers import BartConfig
    from transformers.models.bart.modeling_bart import BartDecoderLayer

    cfg = BartConfig(d_model=32, decoder_attention_heads=4, decoder_ffn_dim=64,
                     attn_implementation="eager")
    layer = _eval(BartDecoderLayer(cfg, layer_idx=0))

    def bart_layer(x, encoder_states, encoder_mask):
        self_mask = _causal_mask(x.shape[1], x.dtype, x.device)
        cross_mask = _padding_mask(encoder_mask, x.dtype, x.shape[1])
        return _first(layer(x, self_mask, encoder_hidden_states=encoder_states,
                            encoder_attention_mask=cross_mask, use_cache=False))

    def inputs():
        mask = torch.ones(2, 8, dtype=torch.long)
        mask[1, 5:] = 0  # the second source sentence is padded
        return _r(2, 6, 32), _r(2, 8, 32), mask

    return bart_layer, inputs


def _persimmon_layer():
    from transformers import PersimmonConfig
    from transformers.models.persimmon.modeling_persimmon import (
        PersimmonDecoderLayer,
        PersimmonRotaryEmbedding,
    )

    cfg = PersimmonConfig(hidden_size=32, num_attention_heads=4, intermediate_size=64,
                          num_hidden_layers=1, vocab_size=64, max_position_embeddings=16,
                          qk_layernorm=True, attn_implementation="eager")
    layer = _eval(PersimmonDecoderLayer(cfg, 0))
    rope = _eval(PersimmonRotaryEmbedding(cfg))

    def persimmon(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, mask, position_ids=position_ids,
                            position_embeddings=rope(x, position_ids)))

    return persimmon, lambda: (_r(2, 8, 32), _positions(2, 8))


def _olmo2_layer_bf16():
    from transformers import Olmo2Config
    from transformers.models.olmo2.modeling_olmo2 import Olmo2DecoderLayer, Olmo2RotaryEmbedding

    cfg = Olmo2Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                      intermediate_size=64, num_hidden_layers=1, vocab_size=64,
                      max_position_embeddings=16, eos_token_id=None,
                      attn_implementation="eager")
    layer = _eval(Olmo2DecoderLayer(cfg, 0)).to(torch.bfloat16)
    rope = _eval(Olmo2RotaryEmbedding(cfg))

    def olmo2(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, mask, position_ids=position_ids,
                            position_embeddings=rope(x, position_ids)))

    return olmo2, lambda: (_r(2, 8, 32, dtype=torch.bfloat16), _positions(2, 8))


def _nystromformer_layer():
    from transformers import NystromformerConfig
    from transformers.models.nystromformer.modeling_nystromformer import NystromformerLayer

    cfg = NystromformerConfig(hidden_size=32, num_attention_heads=4, intermediate_size=64,
                              num_landmarks=4, segment_means_seq_len=16, conv_kernel_size=3)
    layer = _eval(NystromformerLayer(cfg))
    return (lambda x: _first(layer(x))), lambda: (_r(2, 16, 32),)


def _convbert_layer():
    from transformers import ConvBertConfig
    from transformers.models.convbert.modeling_convbert import ConvBertLayer

    cfg = ConvBertConfig(hidden_size=32, num_attention_heads=4, intermediate_size=64,
                         head_ratio=2, conv_kernel_size=3, num_groups=1)
    layer = _eval(ConvBertLayer(cfg))
    return (lambda x: _first(layer(x))), lambda: (_r(2, 8, 32),)


def _pvt_v2_block():
    from transformers import PvtV2Config
    from transformers.models.pvt_v2.modeling_pvt_v2 import PvtV2BlockLayer

    cfg = PvtV2Config(hidden_sizes=[32, 64, 160, 256], num_attention_heads=[2, 2, 5, 8],
                      sr_ratios=[2, 2, 2, 1], mlp_ratios=[2, 4, 4, 4], linear_attention=False)
    layer = _eval(PvtV2BlockLayer(cfg, layer_idx=0))
    return (lambda x: _first(layer(x, 8, 8))), lambda: (_r(2, 64, 32),)


def _upernet_head():
    from transformers import UperNetConfig
    from transformers.models.upernet.modeling_upernet import UperNetHead

    cfg = UperNetConfig(hidden_size=16, pool_scales=[1, 2, 3, 6], num_labels=5)
    head = _eval(UperNetHead(cfg, in_channels=[8, 16, 16, 32]))

    def upernet(c2, c3, c4, c5):  # the backbone's four stages, strides 4 to 32
        return head([c2, c3, c4, c5])

    return upernet, lambda: (_r(2, 8, 16, 16), _r(2, 16, 8, 8), _r(2, 16, 4, 4), _r(2, 32, 2, 2))


def _dpt_fusion_layer():
    from transformers import DPTConfig
    from transformers.models.dpt.modeling_dpt import DPTFeatureFusionLayer

    cfg = DPTConfig(fusion_hidden_size=16, use_batch_norm_in_fusion_residual=False)
    layer = _eval(DPTFeatureFusionLayer(cfg))
    return (lambda x, skip: layer(x, skip)), lambda: (_r(2, 16, 8, 8), _r(2, 16, 8, 8))


def _sam_two_way_block():
    from transformers import SamMaskDecoderConfig
    from transformers.models.sam.modeling_sam import SamTwoWayAttentionBlock

    cfg = SamMaskDecoderConfig(hidden_size=32, num_attention_heads=4, mlp_dim=64,
                               attention_downsample_rate=2, attn_implementation="eager")
    block = _eval(SamTwoWayAttentionBlock(cfg, attention_downsample_rate=2))

    def sam_block(queries, keys, query_pe, key_pe):
        return block(queries, keys, query_pe, key_pe, attention_similarity=None)

    # (batch, point_batch, tokens, hidden): 5 prompt tokens, a 4x4 image embedding flattened
    return sam_block, lambda: (_r(1, 2, 5, 32), _r(1, 2, 16, 32), _r(1, 2, 5, 32),
                               _r(1, 2, 16, 32))


def _olmoe_block():
    from transformers import OlmoeConfig
    from transformers.models.olmoe.modeling_olmoe import OlmoeSparseMoeBlock

    cfg = OlmoeConfig(hidden_size=32, intermediate_size=16, num_experts=4,
                      num_experts_per_tok=2, norm_topk_prob=False,
                      experts_implementation="batched_mm")
    block = _eval(_normal_init(OlmoeSparseMoeBlock(cfg)))
    return (lambda x: block(x)), lambda: (_r(2, 8, 32),)


def _conformer_encoder():
    from transformers import FastSpeech2ConformerConfig
    from transformers.models.fastspeech2_conformer.modeling_fastspeech2_conformer import (
        FastSpeech2ConformerEncoder,
    )

    cfg = FastSpeech2ConformerConfig(hidden_size=32, encoder_num_attention_heads=4,
                                     encoder_layers=1, encoder_linear_units=64,
                                     encoder_kernel_size=7, positionwise_conv_kernel_size=3)
    torch.manual_seed(0)
    encoder = FastSpeech2ConformerEncoder(cfg, cfg.encoder_config)
    attention = encoder.conformer_layers[0].self_attn
    for bias in (attention.pos_bias_u, attention.pos_bias_v):  # left uninitialized by the module
        torch.nn.init.normal_(bias, std=0.2)
    encoder = _eval(encoder)
    return (lambda x: encoder(x, return_dict=False)[0]), lambda: (_r(2, 8, 32),)


def _electra_discriminator_loss():
    from transformers import ElectraConfig
    from transformers.models.electra.modeling_electra import ElectraDiscriminatorPredictions

    head = _eval(ElectraDiscriminatorPredictions(ElectraConfig(hidden_size=32)))

    def electra_rtd(hidden, labels):  # ElectraForPreTraining's loss, no attention mask
        logits = head(hidden)
        loss = torch.nn.BCEWithLogitsLoss()(logits.view(-1, hidden.shape[1]), labels.float())
        return loss, logits

    return electra_rtd, lambda: (_r(2, 8, 32), torch.randint(0, 2, (2, 8)))


def _recurrent_gemma_recurrent_block():
    from transformers import RecurrentGemmaConfig
    from transformers.models.recurrent_gemma.modeling_recurrent_gemma import (
        RecurrentGemmaRecurrentBlock,
    )

    cfg = RecurrentGemmaConfig(hidden_size=32, lru_width=32, num_attention_heads=4,
                               conv1d_width=4, num_hidden_layers=1, vocab_size=64,
                               intermediate_size=64)
    block = _eval(_normal_init(RecurrentGemmaRecurrentBlock(cfg, layer_idx=0)))

    def griffin(x, position_ids):
        return block(x, position_ids, attention_mask=None, use_cache=False)[0]

    return griffin, lambda: (_r(2, 6, 32), _positions(2, 6))


_BUILDERS = {
    "opt_decoder_layer_bf16": _opt_decoder_layer_bf16,
    "bart_decoder_layer": _bart_decoder_layer,
    "persimmon_layer": _persimmon_layer,
    "olmo2_layer_bf16": _olmo2_layer_bf16,
    "nystromformer_layer": _nystromformer_layer,
    "convbert_layer": _convbert_layer,
    "pvt_v2_block": _pvt_v2_block,
    "upernet_head": _upernet_head,
    "dpt_fusion_layer": _dpt_fusion_layer,
    "sam_two_way_block": _sam_two_way_block,
    "olmoe_block": _olmoe_block,
    "conformer_encoder": _conformer_encoder,
    "electra_discriminator_loss": _electra_discriminator_loss,
    "recurrent_gemma_recurrent_block": _recurrent_gemma_recurrent_block,
}

# Graphs whose audit fails for a reason in the comparison (see the module docstring): none now.
NOT_ALIGNED: dict = {}


def heldout4_graphs() -> dict:
    """{name: (fn, make_inputs)}, modules built (with seeded weights) on first call."""
    return {name: build() for name, build in _BUILDERS.items()}
