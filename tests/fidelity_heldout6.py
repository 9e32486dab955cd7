"""The SIXTH HELD-OUT fidelity suite, written blind: its list of graphs was committed before any
comparison was run on it, by someone who was not tuning the scheduler, while two engineers tuned
on the other suites, so that the figure it gives is that of graphs nobody tuned on.

Blocks, heads, losses and one training step of real models built from the module code of
`transformers` with tiny configs and seeded random weights, from families used in none of the
other suites (fidelity_graphs, fidelity_tuning_hf, fidelity_heldout .. fidelity_heldout5).
Small shapes, so that the whole suite compares in about a minute. Chosen for what real
workloads contain, before anything was measured:

- gpt_neox_layer_bf16: GPT-NeoX's (Pythia) decoder layer in bfloat16, the parallel residual
  (attention and MLP both read the layer's input), fused biased QKV, partial rotary (a quarter
  of each head), a GELU MLP.
- nemotron_layer: Nemotron's decoder layer, LayerNorm1P (a zero-centred weight, +1 in the
  norm), partial rotary, grouped-query attention, a squared-ReLU MLP without a gate.
- stablelm_layer_train_step: StableLM-2's decoder layer TRAINED one step: forward and backward
  (torch.func.grad of an MSE loss against a target, the gradient of every weight returned),
  a per-head LayerNorm on queries and keys, partial rotary, SwiGLU MLP.
- squeezebert_encoder: SqueezeBERT's encoder layer, channels-first: Q, K, V and the
  feed-forward as grouped 1x1 conv1d, LayerNorms across channels (permute in and out), a
  padding mask.
- hiera_pooling_layer: Hiera's stage-transition layer, mask-unit attention (windows laid out
  by the unroll) with query pooling (a max over the stride), a projection of the residual
  pooled the same way.
- cvt_layer: CvT's transformer layer, the queries, keys and values each made by a depthwise
  3x3 convolution and BatchNorm on the token map (keys and values at stride 2), a class token
  split off and put back, pre-LN, GELU MLP.
- hgnetv2_light_block: HGNet-V2's (RT-DETR's backbone) basic layer, light blocks (a 1x1 conv
  then a depthwise 5x5, each BatchNorm, ReLU and a learnable affine), the outputs of every
  block concatenated, squeeze and excitation 1x1 convolutions, a residual.
- wavlm_encoder_layer: WavLM's post-LN encoder layer, the T5-style bucketed relative position
  bias gated per head by the hidden states (the GRU-like gate), attention through
  F.multi_head_attention_forward with separate projection weights.
- univnet_lvc_block: UnivNet's vocoder block, a transposed convolution up, the kernel predictor
  (conv1d residual stack from the spectrogram), location-variable convolution (pad, three
  unfolds, an einsum with the predicted kernels), a gated tanh-sigmoid unit, residuals.
- lfm2_conv_layer: LFM2's short-convolution decoder layer, RMSNorm, B*x gating, a causal
  depthwise conv1d, C* gating, a padding mask applied to the states, SwiGLU MLP.
- dbrx_router: DBRX's MoE router as DbrxFFN computes it, softmax over the experts, top-k, the
  chosen weights divided by their p-norm (DBRX's experts loop over `nonzero`, which Dynamo
  cannot capture, so the router alone).
- deepseek_v3_moe: DeepSeek-V3's MoE, sigmoid scores with a score-correction bias, group-limited
  routing (top-2 sum per group, top groups, scatter mask, masked_fill), top-k, gather,
  normalised and scaled weights, experts as 3-D weights ("batched_mm") and a shared expert.
- owlvit_detection_head: OWL-ViT's open-vocabulary detection heads, the class head (normalised
  image and query embeddings, einsum, a learnt shift and an ELU+1 scale, a query mask through
  where) and the box head (a GELU MLP, the grid box bias, sigmoid).
- mask2former_mask_loss: Mask2Former's mask losses after matching: the matched masks gathered,
  uncertainty point sampling (grid_sample at oversampled points, top-k of -|logit|, a gather
  of the coordinates, cat with random points), grid_sample of predictions and targets,
  sigmoid cross-entropy and dice losses.
- swiftformer_encoder_block: SwiftFormer's encoder block, the local representation (depthwise
  3x3 convolution, BatchNorm, pointwise convolutions, GELU, a layer scale), efficient additive
  attention (L2-normalised queries and keys, a learnt global query by a softmax-weighted sum,
  broadcast product), a 1x1-convolution MLP, layer scales. It stood in for
  groupvit_token_assign (below) while our compiler failed on that one.

- groupvit_token_assign: GroupViT's grouping block, a token-mixing MLP on the group tokens,
  cross-attention to the image tokens, the hard assignment (softmax over groups, argmax,
  scatter of a one-hot, straight-through), normalised assignment, MLP. Chosen with the others;
  the first run of the comparison stopped on it, before any figure was printed: our backend
  raised `KeyError` in its runner (a `zeros_like` of scores no kernel stored asked for them).
  Fixed in the compiler (codegen.py: a like-factory's template stand-in) without looking at
  any figure of this suite, and put back; swiftformer_encoder_block, its stand-in meanwhile,
  stays.

The random parts of a graph (Mask2Former's sampled points) are inputs, so that the compiled
code and eager see the same ones. The training step differentiates with `torch.func.grad`
inside the compiled function, so that forward and backward are one graph (the comparison
compiles one graph per entry). Each entry: a function of tensors and a maker of small CPU
inputs. Do not change the scheduler's rules while looking at these graphs: the figure is only
honest while no rule was tuned against them."""

import types

import torch
from fidelity_heldout import _causal_mask, _eval, _first, _positions, _r
from fidelity_heldout4 import _normal_init
from fidelity_heldout5 import _with_bn_statistics


def _decoder_train_step(layer: torch.nn.Module, rope: torch.nn.Module):
    """A decoder layer's training step as one graph: the gradient of an MSE loss for every
    weight (`torch.func.grad` inside the compiled function), under a causal mask, on a
    (2, 8, 32) batch."""
    params = dict(layer.named_parameters())

    def train_step(x, position_ids, target):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        cos_sin = rope(x, position_ids)

        def loss(weights):
            out = torch.func.functional_call(layer, weights, (x, mask),
                                             {"position_ids": position_ids,
                                              "position_embeddings": cos_sin})
            return torch.nn.functional.mse_loss(_first(out), target)

        return torch.func.grad(loss)(params)

    return train_step, lambda: (_r(2, 8, 32), _positions(2, 8), _r(2, 8, 32))


def _gpt_neox_layer_bf16():
    from transformers import GPTNeoXConfig
    from transformers.models.gpt_neox.modeling_gpt_neox import (
        GPTNeoXLayer,
        GPTNeoXRotaryEmbedding,
    )

    cfg = GPTNeoXConfig(hidden_size=32, num_attention_heads=4, intermediate_size=64,
                        num_hidden_layers=1, vocab_size=64, max_position_embeddings=16,
                        rotary_pct=0.25, use_parallel_residual=True, bos_token_id=None,
                        eos_token_id=None, attn_implementation="eager")
    layer = _eval(GPTNeoXLayer(cfg, 0)).to(torch.bfloat16)
    rope = _eval(GPTNeoXRotaryEmbedding(cfg))

    def gpt_neox(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, mask, position_ids=position_ids,
                            position_embeddings=rope(x, position_ids)))

    return gpt_neox, lambda: (_r(2, 8, 32, dtype=torch.bfloat16), _positions(2, 8))


def _nemotron_layer():
    from transformers import NemotronConfig
    from transformers.models.nemotron.modeling_nemotron import (
        NemotronDecoderLayer,
        NemotronRotaryEmbedding,
    )

    cfg = NemotronConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=8, intermediate_size=64, num_hidden_layers=1, vocab_size=64,
                         max_position_embeddings=16, partial_rotary_factor=0.5,
                         bos_token_id=None, eos_token_id=None, attn_implementation="eager")
    layer = _eval(_normal_init(NemotronDecoderLayer(cfg, 0)))  # LayerNorm1P's weight is 0
    rope = _eval(NemotronRotaryEmbedding(cfg))

    def nemotron(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, mask, position_ids=position_ids,
                            position_embeddings=rope(x, position_ids)))

    return nemotron, lambda: (_r(2, 8, 32), _positions(2, 8))


def _stablelm_layer_train_step():
    from transformers import StableLmConfig
    from transformers.models.stablelm.modeling_stablelm import (
        StableLmDecoderLayer,
        StableLmRotaryEmbedding,
    )

    cfg = StableLmConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=4,
                         intermediate_size=64, num_hidden_layers=1, vocab_size=64,
                         max_position_embeddings=16, partial_rotary_factor=0.25,
                         use_qk_layernorm=True, use_parallel_residual=False,
                         bos_token_id=None, eos_token_id=None, attn_implementation="eager")
    layer = _eval(StableLmDecoderLayer(cfg, 0))
    rope = _eval(StableLmRotaryEmbedding(cfg))
    return _decoder_train_step(layer, rope)


def _squeezebert_encoder():
    from transformers import SqueezeBertConfig
    from transformers.models.squeezebert.modeling_squeezebert import SqueezeBertEncoder

    cfg = SqueezeBertConfig(hidden_size=32, embedding_size=32, num_attention_heads=4,
                            intermediate_size=64, num_hidden_layers=1, q_groups=4, k_groups=4,
                            v_groups=4, post_attention_groups=1, intermediate_groups=4,
                            output_groups=4)
    encoder = _eval(SqueezeBertEncoder(cfg))

    def squeezebert(x, padding):
        # SqueezeBertModel's extended mask: [batch, 1, 1, source], finfo.min where padded
        mask = (1.0 - padding[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        return _first(encoder(x, attention_mask=mask, return_dict=False))

    def inputs():
        padding = torch.ones(2, 8, dtype=torch.long)
        padding[1, 5:] = 0  # the second sentence is three tokens shorter
        return _r(2, 8, 32), padding

    return squeezebert, inputs


def _hiera_pooling_layer():
    from transformers import HieraConfig
    from transformers.models.hiera.modeling_hiera import HieraLayer

    layer = _eval(HieraLayer(HieraConfig(), hidden_size=16, hidden_size_output=32, num_heads=2,
                             query_stride=4, window_size=4, use_mask_unit_attn=True))
    return (lambda x: _first(layer(x))), lambda: (_r(2, 64, 16),)


def _cvt_layer():
    from transformers.models.cvt.modeling_cvt import CvtLayer

    layer = _eval(_with_bn_statistics(CvtLayer(
        num_heads=2, embed_dim=16, kernel_size=3, padding_q=1, padding_kv=1, stride_q=1,
        stride_kv=2, qkv_projection_method="dw_bn", qkv_bias=True, attention_drop_rate=0.0,
        drop_rate=0.0, mlp_ratio=4.0, drop_path_rate=0.0, with_cls_token=True)))
    return (lambda x: layer(x, 8, 8)), lambda: (_r(2, 1 + 64, 16),)


def _hgnetv2_light_block():
    from transformers.models.hgnet_v2.modeling_hgnet_v2 import HGNetV2BasicLayer

    block = HGNetV2BasicLayer(16, 8, 16, layer_num=3, kernel_size=5, residual=True,
                              light_block=True, use_learnable_affine_block=True)
    torch.manual_seed(1)
    for affine in (m for m in block.modules() if type(m).__name__.endswith("AffineBlock")):
        torch.nn.init.normal_(affine.scale, mean=1.0, std=0.2)  # fresh: scale 1, bias 0
        torch.nn.init.normal_(affine.bias, std=0.2)
    block = _eval(_with_bn_statistics(block))
    return (lambda x: block(x)), lambda: (_r(2, 16, 8, 8),)


def _wavlm_encoder_layer():
    from transformers import WavLMConfig
    from transformers.models.wavlm.modeling_wavlm import WavLMEncoderLayer

    cfg = WavLMConfig(hidden_size=32, num_attention_heads=4, intermediate_size=64,
                      num_hidden_layers=1, num_buckets=32, max_bucket_distance=64)
    torch.manual_seed(0)
    layer = _eval(WavLMEncoderLayer(cfg, has_relative_position_bias=True))
    return (lambda x: _first(layer(x))), lambda: (_r(2, 12, 32),)


def _univnet_lvc_block():
    from transformers import UnivNetConfig
    from transformers.models.univnet.modeling_univnet import UnivNetLvcBlock

    cfg = UnivNetConfig(model_in_channels=16, model_hidden_channels=8, num_mel_bins=12,
                        resblock_kernel_sizes=[3], resblock_stride_sizes=[2],
                        resblock_dilation_sizes=[[1, 3]], kernel_predictor_num_blocks=1,
                        kernel_predictor_hidden_channels=16)  # the predictor's width: in_channels
    torch.manual_seed(0)
    block = _eval(UnivNetLvcBlock(cfg, layer_id=0, lvc_hop_size=8))
    # hidden (batch, 8, 16) upsampled by 2 to 32 samples = 4 spectrogram frames of hop 8
    return (lambda x, mel: block(x, mel)), lambda: (_r(2, 8, 16), _r(2, 12, 4))


def _lfm2_conv_layer():
    from transformers import Lfm2Config
    from transformers.models.lfm2.modeling_lfm2 import Lfm2DecoderLayer

    cfg = Lfm2Config(hidden_size=32, intermediate_size=64, num_attention_heads=4,
                     num_key_value_heads=2, num_hidden_layers=1, vocab_size=64,
                     layer_types=["conv"], block_auto_adjust_ff_dim=False, conv_L_cache=3,
                     bos_token_id=None, eos_token_id=None, pad_token_id=None)
    layer = _eval(_normal_init(Lfm2DecoderLayer(cfg, 0)))

    def lfm2(x, padding):
        return layer(x, attention_mask=padding)

    def inputs():
        padding = torch.ones(2, 8, dtype=torch.long)
        padding[1, :2] = 0  # the second prompt is left-padded by two
        return _r(2, 8, 32), padding

    return lfm2, inputs


def _dbrx_router():
    from transformers import DbrxConfig
    from transformers.models.dbrx.modeling_dbrx import DbrxFFN

    cfg = DbrxConfig(d_model=32, n_heads=4, n_layers=1, max_seq_len=16, vocab_size=64,
                     ffn_config={"ffn_hidden_size": 16, "moe_num_experts": 8, "moe_top_k": 2,
                                 "moe_normalize_expert_weights": 1.0})
    ffn = _eval(_normal_init(DbrxFFN(cfg)))

    def dbrx(x):  # DbrxFFN.forward up to the experts
        return ffn.route_tokens_to_experts(ffn.router(x))

    return dbrx, lambda: (_r(2, 8, 32),)


def _deepseek_v3_moe():
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE

    cfg = DeepseekV3Config(hidden_size=32, moe_intermediate_size=16, n_routed_experts=8,
                           num_experts_per_tok=2, n_group=4, topk_group=2, n_shared_experts=1,
                           routed_scaling_factor=2.5, norm_topk_prob=True,
                           experts_implementation="batched_mm")
    moe = _normal_init(DeepseekV3MoE(cfg))
    torch.manual_seed(0)
    moe.gate.e_score_correction_bias.normal_(std=0.1)  # learnt load balancing, fresh at 0
    moe = _eval(moe)
    return (lambda x: moe(x)), lambda: (_r(2, 8, 32),)


def _owlvit_detection_head():
    from transformers import OwlViTConfig
    from transformers.models.owlvit.modeling_owlvit import (
        OwlViTBoxPredictionHead,
        OwlViTClassPredictionHead,
        OwlViTForObjectDetection,
    )

    cfg = OwlViTConfig(text_config={"hidden_size": 24}, vision_config={"hidden_size": 32})
    torch.manual_seed(0)
    class_head = _eval(OwlViTClassPredictionHead(cfg))
    box_head = _eval(OwlViTBoxPredictionHead(cfg))
    # OwlViTForObjectDetection's box_bias buffer for a 4x4 patch grid (built once, at init)
    grid = types.SimpleNamespace(normalize_grid_corner_coordinates=(
        OwlViTForObjectDetection.normalize_grid_corner_coordinates))
    box_bias = OwlViTForObjectDetection.compute_box_bias(grid, 4, 4).to("mtia_sim")

    def owlvit(image_feats, query_embeds, query_mask):
        logits, class_embeds = class_head(image_feats, query_embeds, query_mask)
        boxes = torch.sigmoid(box_head(image_feats) + box_bias)
        return logits, class_embeds, boxes

    def inputs():
        query_mask = torch.ones(2, 3, dtype=torch.long)
        query_mask[1, 2] = 0  # the second image has two text queries
        return _r(2, 16, 32), _r(2, 3, 24), query_mask

    return owlvit, inputs


def _mask2former_mask_loss():
    from transformers.models.mask2former.modeling_mask2former import (
        dice_loss,
        sample_point,
        sigmoid_cross_entropy_loss,
    )

    num_points, importance = 12, 0.75  # num_points * oversample_ratio 3 sampled first

    def mask_loss(masks_logits, target_masks, src_idx, tgt_idx, oversampled, random_points):
        # Mask2FormerLoss.loss_masks, the Hungarian matches given as indices
        pred_masks = masks_logits[src_idx[0], src_idx[1]][:, None]
        targets = target_masks[tgt_idx[0], tgt_idx[1]][:, None]
        with torch.no_grad():  # sample_points_using_uncertainty, its torch.rand as inputs
            point_logits = sample_point(pred_masks, oversampled, align_corners=False)
            uncertainty = -torch.abs(point_logits)
            num_boxes, sampled = oversampled.shape[:2]
            idx = torch.topk(uncertainty[:, 0, :], k=int(importance * num_points), dim=1)[1]
            idx = idx + sampled * torch.arange(num_boxes, device=idx.device)[:, None]
            points = oversampled.view(-1, 2)[idx.view(-1), :].view(num_boxes, -1, 2)
            points = torch.cat([points, random_points], dim=1)
            point_labels = sample_point(targets, points, align_corners=False).squeeze(1)
        point_logits = sample_point(pred_masks, points, align_corners=False).squeeze(1)
        num_masks = src_idx.shape[1]
        return (sigmoid_cross_entropy_loss(point_logits, point_labels, num_masks),
                dice_loss(point_logits, point_labels, num_masks))

    def inputs():
        target_masks = (torch.rand(2, 3, 16, 16) > 0.5).float()  # padded to 3 per image
        src_idx = torch.tensor([[0, 0, 1, 1], [4, 1, 2, 5]])  # (image, query) matched
        tgt_idx = torch.tensor([[0, 0, 1, 1], [1, 0, 0, 2]])  # (image, target mask)
        return (_r(2, 6, 8, 8), target_masks, src_idx, tgt_idx, torch.rand(4, 3 * num_points, 2),
                torch.rand(4, num_points - int(importance * num_points), 2))

    return mask_loss, inputs


def _groupvit_token_assign():
    from transformers import GroupViTVisionConfig
    from transformers.models.groupvit.modeling_groupvit import GroupViTTokenAssign

    cfg = GroupViTVisionConfig(hidden_size=32, num_attention_heads=4, intermediate_size=64)
    torch.manual_seed(0)
    assign = _eval(GroupViTTokenAssign(cfg, num_group_token=8, num_output_group=4))
    return (lambda image, groups: assign(image, groups)), lambda: (_r(2, 16, 32), _r(2, 8, 32))


def _swiftformer_encoder_block():
    from transformers import SwiftFormerConfig
    from transformers.models.swiftformer.modeling_swiftformer import SwiftFormerEncoderBlock

    block = SwiftFormerEncoderBlock(SwiftFormerConfig(), dim=16)
    torch.manual_seed(1)
    for name, scale in block.named_parameters():
        if "layer_scale" in name:  # fresh: 1e-5 and 1, which would hide a branch or be a no-op
            torch.nn.init.normal_(scale, mean=0.5, std=0.2)
    block = _eval(_with_bn_statistics(block))
    return (lambda x: block(x)), lambda: (_r(2, 16, 8, 8),)


_BUILDERS = {
    "gpt_neox_layer_bf16": _gpt_neox_layer_bf16,
    "nemotron_layer": _nemotron_layer,
    "stablelm_layer_train_step": _stablelm_layer_train_step,
    "squeezebert_encoder": _squeezebert_encoder,
    "hiera_pooling_layer": _hiera_pooling_layer,
    "cvt_layer": _cvt_layer,
    "hgnetv2_light_block": _hgnetv2_light_block,
    "wavlm_encoder_layer": _wavlm_encoder_layer,
    "univnet_lvc_block": _univnet_lvc_block,
    "lfm2_conv_layer": _lfm2_conv_layer,
    "dbrx_router": _dbrx_router,
    "deepseek_v3_moe": _deepseek_v3_moe,
    "owlvit_detection_head": _owlvit_detection_head,
    "mask2former_mask_loss": _mask2former_mask_loss,
    "swiftformer_encoder_block": _swiftformer_encoder_block,
    "groupvit_token_assign": _groupvit_token_assign,
}

# Graphs whose audit fails for a reason in the comparison (none known when this was written).
NOT_ALIGNED: dict = {}



def heldout6_graphs() -> dict:
    """{name: (fn, make_inputs)}, modules built (with seeded weights) on first call."""
    torch.manual_seed(0)
    return {name: build() for name, build in _BUILDERS.items()}
