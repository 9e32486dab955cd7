"""The TWELFTH HELD-OUT fidelity suite, written blind: its list of graphs was committed before
any comparison was run on it, by someone who was not tuning the scheduler, while others tuned
on the other suites, so that the figure it gives is that of graphs nobody tuned on.

Decoder layers (one in bfloat16), an MoE block, a hybrid state-space layer, a language model's
sampling step, two training steps, a vision backbone, detection, depth estimation, speech,
music, time series and a document encoder, built from the module code of `transformers` with
tiny configs and seeded random weights, from fifteen families used in none of the other suites
(fidelity_graphs, fidelity_tuning_hf, fidelity_heldout .. fidelity_heldout11) nor in any other
test (torchvision and timm are not installed). Small shapes (batch 2, widths <= 64, sequences
<= 32, images <= 32x32, one or two layers), so that the whole suite compiles in about a minute
and a half. Chosen for what real workloads contain, before anything was measured:

- olmo3_layer_bf16: OLMo 3's decoder layer in bfloat16, a local (sliding-window, 4) layer:
  post-norm (RMSNorm after attention and after the MLP), QK-norm over all heads, rotary,
  grouped-query attention, SwiGLU.
- arcee_layer: Arcee's (AFM) decoder layer: RMSNorms, rotary, grouped-query attention under a
  causal mask, and its MLP without a gate (ReLU-squared).
- ministral_lm_train_step: Ministral's causal language model TRAINED one step: forward and
  backward (torch.func.grad of the shifted cross-entropy, padding labels -100, every weight's
  gradient); two layers, sliding-window attention under a padding mask, the LM head.
- deepseek_v2_moe_block: DeepSeek-V2's MoE block: a softmax router, group-limited greedy
  top-k (the best 2 of 4 expert groups by their max score, the others masked by a scatter,
  then top-2 of 8 experts), "batched_mm" experts, a shared SwiGLU expert.
- falcon_h1_layer: Falcon-H1's hybrid decoder layer: a Mamba-2 mixer (in projection, causal
  depthwise conv1d with SiLU, the chunked selective scan's PyTorch path: cumsum, segment sums,
  exp; the gated RMSNorm) IN PARALLEL with rotary grouped-query attention, their muP
  multipliers, the SwiGLU MLP.
- helium_lm_sampling_step: Helium's (Kyutai) causal LM and one step of sampling's logits
  processing: the last position's logits, the repetition penalty (gather and scatter over the
  tokens seen), the typical-p warper (entropy, sort, cumsum, scatter), min-p, the softmax.
- deit_classifier_train_step: DeiT's image classifier TRAINED one step: forward and backward
  (torch.func.grad of the cross-entropy, every weight's gradient) on a 32x32 image: conv patch
  embeddings, class and distillation tokens, two layers, the head on the class token.
- efficientloftr_backbone: EfficientLoFTR's RepVGG backbone on two 32x32 grayscale images:
  three stages of RepVGG blocks (3x3 conv + BatchNorm, 1x1 conv + BatchNorm, identity
  BatchNorm, summed, ReLU), strided.
- lw_detr_detection: LW-DETR's real-time detector on a 32x32 image: a plain ViT backbone
  (windowed attention in its first layer, global in its second, both layers' features
  taken), the C2f projector (convs with BatchNorm and SiLU, the split and concatenated
  bottlenecks, a channels-first LayerNorm),
  the two-stage query selection (encoder proposals, top-k and gather of the best ones), the
  decoder's multi-scale deformable attention (grid_sample), the class and box heads. It
  replaces d_fine_detection (below), on which the comparison crashed before any figure was
  printed.
- zoedepth_depth: ZoeDepth's metric depth estimation on a 32x32 image: a BEiT backbone
  (relative position bias), the DPT neck (reassemble, fusion with bilinear upsampling), the
  relative depth head, the metric bins head (seed bins, attractors, the log-binomial softmax,
  interpolation).
- granite_speech_encoder: Granite Speech's CTC conformer encoder on 16 frames of 16 features:
  two Conformer blocks (half-step feed-forwards, block self-attention with Shaw relative
  positions gathered from an embedding table, the conv module: pointwise conv, GLU, depthwise
  conv, BatchNorm, SiLU), the mid-layer CTC softmax fed back.
- sew_d_encoder: SEW-D's speech encoder on 400 samples with a padding mask: the conv feature
  encoder (group-norm), the squeeze (average pooling by 2), DeBERTa-v2 disentangled attention
  with log-bucketed relative positions, the upsampling back to the frame rate.
- musicgen_decoder: MusicGen's decoder (audio codes language model): four codebooks' token
  embeddings summed, sinusoidal positions, two decoder layers, one LM head per codebook.
- informer_normal_forecast: Informer's probabilistic forecaster and its loss, with a Normal
  output: the mean scaler, lagged subsequences, time features, two encoder layers with the
  distilling conv layer between them (Conv1d, BatchNorm, ELU, max pooling), a decoder layer,
  full attention, the negative log-likelihood.
- layoutlm_token_classifier: LayoutLM's token classifier and its loss on 16 tokens with their
  boxes under a padding mask: word, position and 2-D layout embeddings (x0, y0, x1, y1, width,
  height gathered from tables), a BERT layer, the head, the cross-entropy (-100 ignored).

NOT_COMPILED, replaced after the first run of the comparison (the blind test's fixture)
crashed on it, before any figure was printed. Eager runs it and Dynamo captures it in one
graph; the comparison's attribution of Inductor's launches to our nodes fails:

- d_fine_detection: D-FINE's real-time detector on a 32x32 image: an HGNetV2 backbone
  (stem, stages with light blocks and max pooling, frozen BatchNorms), the hybrid encoder (an
  attention layer on the coarsest level, the top-down FPN with nearest upsampling and the
  bottom-up path, RepNCSPELAN4 blocks), anchors, query selection by top-k and gather, the
  decoder's multi-scale deformable attention (grid_sample), the fine-grained distribution
  refinement (the integral over bins), the class and box heads. "StopIteration" raised in
  `_pair_by_operands` (mtia_lab/compare/launches.py, `post[name] = [next(m for m in left
  if ...)]`), called from `_post_grad_nodes` <- `attribute` <- `align`
  (mtia_lab/compare/plans.py) <- `compare_plans` <- `fidelity_rows`. Repro:

      fidelity_rows({"d_fine_detection": _d_fine_detection()})

The training steps differentiate with `torch.func.grad` inside the compiled function, so that
forward and backward are one graph (the comparison compiles one graph per entry). Each entry:
a function of tensors and a maker of small CPU inputs. Do not change the scheduler's rules
while looking at these graphs: the figure is only honest while no rule was tuned against
them."""

import torch
from fidelity_heldout import _causal_mask, _eval, _first, _positions, _r
from fidelity_heldout4 import _normal_init
from fidelity_heldout5 import _with_bn_statistics
from fidelity_heldout7 import _padding_inputs
from fidelity_heldout9 import _NO_SPECIAL_TOKENS, _seeded_norms
from fidelity_heldout10 import _grad_of


def _sliding_mask(length: int, window: int, dtype: torch.dtype, device) -> torch.Tensor:
    """The additive mask of a local layer: causal, at most `window` positions back."""
    rows = torch.arange(length, device=device)
    keep = (rows[None, :] <= rows[:, None]) & (rows[:, None] - rows[None, :] < window)
    return torch.where(keep, 0.0, torch.finfo(dtype).min).to(dtype)[None, None]


def _olmo3_layer_bf16():
    from transformers import Olmo3Config
    from transformers.models.olmo3.modeling_olmo3 import Olmo3DecoderLayer, Olmo3RotaryEmbedding

    cfg = Olmo3Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                      intermediate_size=64, num_hidden_layers=2, vocab_size=64,
                      max_position_embeddings=16, sliding_window=4,
                      layer_types=["sliding_attention", "full_attention"],
                      attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_seeded_norms(_normal_init(Olmo3DecoderLayer(cfg, 0)), 1.0))
    layer = layer.to(torch.bfloat16)
    rope = _eval(Olmo3RotaryEmbedding(cfg))

    def olmo3(x, position_ids):
        mask = _sliding_mask(x.shape[1], 4, x.dtype, x.device)
        cos_sin = rope(x, position_ids, layer_type="sliding_attention")
        return _first(layer(x, attention_mask=mask, position_ids=position_ids,
                            position_embeddings=cos_sin))

    return olmo3, lambda: (_r(2, 8, 32, dtype=torch.bfloat16), _positions(2, 8))


def _arcee_layer():
    from transformers import ArceeConfig
    from transformers.models.arcee.modeling_arcee import ArceeDecoderLayer, ArceeRotaryEmbedding

    cfg = ArceeConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                      intermediate_size=64, num_hidden_layers=1, vocab_size=64,
                      max_position_embeddings=16, attn_implementation="eager",
                      **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_seeded_norms(_normal_init(ArceeDecoderLayer(cfg, 0)), 1.0))
    rope = _eval(ArceeRotaryEmbedding(cfg))

    def arcee(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, attention_mask=mask, position_ids=position_ids,
                            position_embeddings=rope(x, position_ids)))

    return arcee, lambda: (_r(2, 8, 32), _positions(2, 8))


def _ministral_lm_train_step():
    from transformers import MinistralConfig
    from transformers.models.ministral.modeling_ministral import MinistralForCausalLM

    cfg = MinistralConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                          head_dim=8, max_position_embeddings=32, sliding_window=4,
                          layer_types=["sliding_attention", "full_attention"],
                          attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    model = _eval(MinistralForCausalLM(cfg))
    step = _grad_of(model, lambda out: out.loss)

    def ministral(input_ids, padding, labels):
        return step(input_ids=input_ids, attention_mask=padding, labels=labels)

    def inputs():  # 16 tokens, the second 4 shorter (its padding ignored by the loss)
        padding = _padding_inputs(16, 4)
        ids = torch.randint(0, 64, (2, 16)) * padding
        return ids, padding, ids.masked_fill(padding == 0, -100)

    return ministral, inputs


def _deepseek_v2_moe_block():
    from transformers import DeepseekV2Config
    from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2Moe

    cfg = DeepseekV2Config(hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
                           n_routed_experts=8, num_experts_per_tok=2, n_group=4, topk_group=2,
                           topk_method="group_limited_greedy", n_shared_experts=1,
                           routed_scaling_factor=1.0, norm_topk_prob=False,
                           num_hidden_layers=1, num_attention_heads=4, vocab_size=64,
                           experts_implementation="batched_mm", **_NO_SPECIAL_TOKENS)
    block = _eval(_normal_init(DeepseekV2Moe(cfg)))
    return (lambda x: block(x)), lambda: (_r(2, 8, 32),)


def _falcon_h1_layer():
    from transformers import FalconH1Config
    from transformers.models.falcon_h1.modeling_falcon_h1 import (
        FalconH1DecoderLayer,
        FalconH1RotaryEmbedding,
        compute_mup_vector,
    )

    cfg = FalconH1Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=8, intermediate_size=64, num_hidden_layers=1, vocab_size=64,
                         max_position_embeddings=16, mamba_d_ssm=32, mamba_n_heads=4,
                         mamba_d_head=8, mamba_n_groups=1, mamba_d_state=8, mamba_d_conv=4,
                         mamba_expand=1, mamba_chunk_size=4, mamba_rms_norm=True,
                         attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _seeded_norms(_normal_init(FalconH1DecoderLayer(cfg, 0)), 1.0)
    # the muP multipliers of the mixer's projections, registered by FalconH1Model
    layer.mamba.register_buffer("mup_vector", compute_mup_vector(cfg), persistent=False)
    layer = _eval(layer)
    rope = _eval(FalconH1RotaryEmbedding(cfg))

    def falcon_h1(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, attention_mask=mask, position_ids=position_ids,
                            position_embeddings=rope(x, position_ids)))

    return falcon_h1, lambda: (_r(2, 8, 32), _positions(2, 8))


def _helium_lm_sampling_step():
    from transformers import HeliumConfig
    from transformers.generation.logits_process import (
        MinPLogitsWarper,
        RepetitionPenaltyLogitsProcessor,
        TypicalLogitsWarper,
    )
    from transformers.models.helium.modeling_helium import HeliumForCausalLM

    cfg = HeliumConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                       max_position_embeddings=32, attn_implementation="eager",
                       **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    model = _eval(HeliumForCausalLM(cfg))
    penalty = RepetitionPenaltyLogitsProcessor(1.3)
    typical = TypicalLogitsWarper(0.9)
    min_p = MinPLogitsWarper(0.05)

    def helium(input_ids):
        scores = model(input_ids=input_ids).logits[:, -1, :].float()
        scores = min_p(input_ids, typical(input_ids, penalty(input_ids, scores)))
        return scores.softmax(-1)

    return helium, lambda: (torch.randint(0, 64, (2, 12)),)


def _deit_classifier_train_step():
    from transformers import DeiTConfig
    from transformers.models.deit.modeling_deit import DeiTForImageClassification

    cfg = DeiTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, image_size=32, patch_size=8, num_channels=3,
                     num_labels=5, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     attn_implementation="eager")
    torch.manual_seed(0)
    model = DeiTForImageClassification(cfg)
    for name, p in model.named_parameters():  # fresh tokens and positions: zeros, seeded
        if "token" in name or "position_embeddings" in name:
            torch.nn.init.normal_(p, std=0.2)
    model = _eval(model)
    step = _grad_of(model, lambda out: out.loss)

    def deit(pixels, labels):
        return step(pixel_values=pixels, labels=labels)

    return deit, lambda: (_r(2, 3, 32, 32), torch.tensor([1, 3]))


def _efficientloftr_backbone():
    from transformers import EfficientLoFTRConfig
    from transformers.models.efficientloftr.modeling_efficientloftr import EfficientLoFTRepVGG

    cfg = EfficientLoFTRConfig(stage_num_blocks=[1, 2, 2], stage_stride=[2, 1, 2],
                               out_features=[16, 16, 32], hidden_size=32,
                               num_attention_heads=4)
    torch.manual_seed(0)
    backbone = _eval(_with_bn_statistics(_normal_init(EfficientLoFTRepVGG(cfg))))

    def efficientloftr(images):
        return tuple(backbone(images))

    return efficientloftr, lambda: (_r(2, 1, 32, 32),)


def _d_fine_detection():  # NOT_COMPILED (see the docstring), kept for the record
    from transformers import DFineConfig, HGNetV2Config
    from transformers.models.d_fine.modeling_d_fine import DFineForObjectDetection

    backbone = HGNetV2Config(embedding_size=8, depths=[1, 1, 1, 1],
                             hidden_sizes=[16, 32, 48, 64], stem_channels=[3, 8, 8],
                             stage_in_channels=[8, 16, 32, 48],
                             stage_mid_channels=[8, 8, 16, 16],
                             stage_out_channels=[16, 32, 48, 64],
                             stage_num_blocks=[1, 1, 1, 1],
                             stage_downsample=[False, True, True, True],
                             stage_light_block=[False, False, True, True],
                             stage_kernel_size=[3, 3, 5, 5], stage_numb_of_layers=[2, 2, 2, 2],
                             out_features=["stage2", "stage3", "stage4"])
    cfg = DFineConfig(backbone_config=backbone, encoder_in_channels=[32, 48, 64],
                      encoder_hidden_dim=32, encoder_ffn_dim=64, encoder_attention_heads=4,
                      d_model=32, decoder_in_channels=[32, 32, 32], decoder_ffn_dim=64,
                      decoder_attention_heads=4, decoder_layers=2, decoder_n_points=[2, 2, 2],
                      num_queries=6, num_labels=3, num_denoising=0, max_num_bins=8,
                      lqe_hidden_dim=16, hidden_expansion=0.5, depth_mult=0.34,
                      eval_size=None)
    torch.manual_seed(0)
    model = DFineForObjectDetection(cfg)
    torch.manual_seed(0)
    for name, buf in model.named_buffers():  # frozen BatchNorms' statistics: seeded
        if name.endswith("running_mean"):
            buf.normal_(std=0.2)
        elif name.endswith("running_var"):
            buf.uniform_(0.5, 1.5)
    model = _eval(_with_bn_statistics(model))

    def d_fine(pixels):
        out = model(pixel_values=pixels)
        return out.logits, out.pred_boxes

    return d_fine, lambda: (_r(2, 3, 32, 32),)


def _lw_detr_detection():
    from transformers import LwDetrConfig, LwDetrViTConfig
    from transformers.models.lw_detr.modeling_lw_detr import LwDetrForObjectDetection

    backbone = LwDetrViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                               mlp_ratio=2, image_size=32, pretrain_image_size=32, patch_size=8,
                               window_block_indices=[0], num_windows=4, out_indices=[1, 2])
    cfg = LwDetrConfig(backbone_config=backbone, d_model=32, projector_scale_factors=[1.0],
                       c2f_num_blocks=1, decoder_ffn_dim=64, decoder_n_points=2,
                       decoder_layers=2, decoder_self_attention_heads=4,
                       decoder_cross_attention_heads=4, num_queries=6, group_detr=2,
                       num_labels=3)
    torch.manual_seed(0)
    model = _eval(_with_bn_statistics(LwDetrForObjectDetection(cfg)))

    def lw_detr(pixels):
        out = model(pixel_values=pixels)
        return out.logits, out.pred_boxes

    return lw_detr, lambda: (_r(2, 3, 32, 32),)


def _zoedepth_depth():
    from transformers import BeitConfig, ZoeDepthConfig
    from transformers.models.zoedepth.modeling_zoedepth import ZoeDepthForDepthEstimation

    backbone = BeitConfig(hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                          intermediate_size=64, image_size=32, patch_size=8,
                          use_relative_position_bias=True, out_indices=[1, 2, 3, 4],
                          reshape_hidden_states=False, layer_scale_init_value=0.1)
    cfg = ZoeDepthConfig(backbone_config=backbone, neck_hidden_sizes=[8, 16, 32, 32],
                         fusion_hidden_size=16, num_relative_features=8,
                         bottleneck_features=16, num_attractors=[4, 2, 2, 1],
                         bin_embedding_dim=16,
                         bin_configurations=[{"n_bins": 8, "min_depth": 1e-3,
                                              "max_depth": 10.0}],
                         readout_type="project")
    torch.manual_seed(0)
    model = ZoeDepthForDepthEstimation(cfg)
    for name, p in model.named_parameters():  # relative position tables: zeros when fresh
        if "relative_position_bias_table" in name:
            torch.nn.init.normal_(p, std=0.2)
    model = _eval(_with_bn_statistics(model))
    return (lambda pixels: model(pixel_values=pixels).predicted_depth), lambda: (
        _r(2, 3, 32, 32),)


def _granite_speech_encoder():
    from transformers import GraniteSpeechEncoderConfig
    from transformers.models.granite_speech.modeling_granite_speech import (
        GraniteSpeechCTCEncoder,
    )

    cfg = GraniteSpeechEncoderConfig(input_dim=16, num_layers=2, hidden_dim=32,
                                     feedforward_mult=2, num_heads=4, dim_head=8,
                                     output_dim=10, context_size=8, max_pos_emb=16,
                                     dropout=0.0, conv_kernel_size=7,
                                     conv_expansion_factor=2)
    torch.manual_seed(0)
    encoder = _eval(_with_bn_statistics(GraniteSpeechCTCEncoder(cfg), torch.nn.BatchNorm1d))
    return (lambda features: _first(encoder(features))), lambda: (_r(2, 16, 16),)


def _sew_d_encoder():
    from transformers import SEWDConfig
    from transformers.models.sew_d.modeling_sew_d import SEWDModel

    cfg = SEWDConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                     intermediate_size=64, squeeze_factor=2, max_position_embeddings=32,
                     position_buckets=16, conv_dim=(16, 16, 16), conv_stride=(5, 2, 2),
                     conv_kernel=(10, 3, 3), num_conv_pos_embeddings=8,
                     num_conv_pos_embedding_groups=4, feat_extract_norm="group",
                     hidden_dropout=0.0, activation_dropout=0.0, attention_dropout=0.0,
                     feat_proj_dropout=0.0, apply_spec_augment=False, hidden_act="gelu")
    torch.manual_seed(0)
    model = _eval(SEWDModel(cfg))

    def sew_d(waveform, padding):
        return model(input_values=waveform, attention_mask=padding).last_hidden_state

    # 400 samples (19 frames after the feature encoder's strides), the second 100 shorter
    return sew_d, lambda: (_r(2, 400), _padding_inputs(400, 100))


def _musicgen_decoder():
    from transformers import MusicgenDecoderConfig
    from transformers.models.musicgen.modeling_musicgen import MusicgenForCausalLM

    cfg = MusicgenDecoderConfig(vocab_size=32, max_position_embeddings=32, num_hidden_layers=2,
                                ffn_dim=64, num_attention_heads=4, hidden_size=32,
                                num_codebooks=4, dropout=0.0, attention_dropout=0.0,
                                activation_dropout=0.0, layerdrop=0.0, pad_token_id=32,
                                bos_token_id=32, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(MusicgenForCausalLM(cfg))

    def musicgen(codes):  # (batch * codebooks, length) audio codes
        return model(input_ids=codes).logits

    return musicgen, lambda: (torch.randint(0, 32, (8, 12)),)


def _informer_normal_forecast():
    from transformers import InformerConfig
    from transformers.models.informer.modeling_informer import InformerForPrediction

    cfg = InformerConfig(prediction_length=4, context_length=8, lags_sequence=[1, 2, 3],
                         num_time_features=1, input_size=1, d_model=32, encoder_layers=2,
                         decoder_layers=1, encoder_attention_heads=4,
                         decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                         scaling="mean", dropout=0.0, attention_dropout=0.0,
                         activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0,
                         attention_type="full", distil=True, distribution_output="normal")
    torch.manual_seed(0)
    model = _eval(_with_bn_statistics(InformerForPrediction(cfg), torch.nn.BatchNorm1d))

    def informer(past_values, past_time, past_observed, future_values, future_time):
        out = model(past_values=past_values, past_time_features=past_time,
                    past_observed_mask=past_observed, future_values=future_values,
                    future_time_features=future_time)
        return out.loss, out.params

    def inputs():  # 8 steps of context and 3 of lags; the first's first 2 unobserved
        observed = torch.ones(2, 11)
        observed[0, :2] = 0
        time = torch.arange(15.0).expand(2, 15)[..., None] / 15
        return (torch.rand(2, 11) * 4, time[:, :11].contiguous(), observed,
                torch.rand(2, 4) * 4, time[:, 11:].contiguous())

    return informer, inputs


def _layoutlm_token_classifier():
    from transformers import LayoutLMConfig
    from transformers.models.layoutlm.modeling_layoutlm import LayoutLMForTokenClassification

    cfg = LayoutLMConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1,
                         num_attention_heads=4, intermediate_size=64,
                         max_position_embeddings=32, max_2d_position_embeddings=64,
                         num_labels=5, pad_token_id=0, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = _eval(LayoutLMForTokenClassification(cfg))

    def layoutlm(input_ids, boxes, padding, labels):
        out = model(input_ids=input_ids, bbox=boxes, attention_mask=padding, labels=labels)
        return out.loss, out.logits

    def inputs():  # 16 words with boxes on a 64x64 page, the second 5 shorter
        padding = _padding_inputs(16, 5)
        corners = torch.randint(0, 32, (2, 16, 2))
        boxes = torch.cat([corners, corners + torch.randint(1, 32, (2, 16, 2))], -1)
        labels = torch.randint(0, 5, (2, 16)).masked_fill(padding == 0, -100)
        return (torch.randint(1, 64, (2, 16)) * padding, boxes * padding[..., None], padding,
                labels)

    return layoutlm, inputs


_BUILDERS = {
    "olmo3_layer_bf16": _olmo3_layer_bf16,
    "arcee_layer": _arcee_layer,
    "ministral_lm_train_step": _ministral_lm_train_step,
    "deepseek_v2_moe_block": _deepseek_v2_moe_block,
    "falcon_h1_layer": _falcon_h1_layer,
    "helium_lm_sampling_step": _helium_lm_sampling_step,
    "deit_classifier_train_step": _deit_classifier_train_step,
    "efficientloftr_backbone": _efficientloftr_backbone,
    "lw_detr_detection": _lw_detr_detection,
    "zoedepth_depth": _zoedepth_depth,
    "granite_speech_encoder": _granite_speech_encoder,
    "sew_d_encoder": _sew_d_encoder,
    "musicgen_decoder": _musicgen_decoder,
    "informer_normal_forecast": _informer_normal_forecast,
    "layoutlm_token_classifier": _layoutlm_token_classifier,
}

# Graphs whose audit fails for a reason in the comparison: none. The blind test's first run
# failed informer_normal_forecast's count (89 groups against Inductor's 88 kernels): two of its
# groups are one combo kernel (a cat's piece copies), one launch of the wrapper; the check now
# counts them so (fidelity_checks.assert_aligned), as the audit already did.
NOT_ALIGNED: dict[str, str] = {}

# Graphs our compiler or the comparison failed on when the suite was written (see the module
# docstring), kept for the record: replaced before any figure of theirs was seen.
NOT_COMPILED = {"d_fine_detection": (
    "the comparison's attribution of Inductor's launches to our nodes crashes: StopIteration "
    "in mtia_lab/compare/launches.py's _pair_by_operands (align -> attribute -> "
    "_post_grad_nodes). That crash is fixed (the order's pairs are kept when too few nodes "
    "are left over); the comparison then runs but does not align: after each "
    "aten._is_all_true launch it counts six scheduler nodes (op299..op304, op407..op412) "
    "that Inductor's wrapper never launches, 346 launches counted against the wrapper's 334. "
    "Those were Inductor's host code (DynamicScalar, AssertScalar: a torch._check on a "
    "computed tensor), now no launch (mtia_lab/inductor/plan.py): D-FINE aligns and matches "
    "eager, 281 of 334 launches identical with departures off, measured once on 2026-11-28. "
    "It stays out of the suite: lw_detr took its place before any figure was seen, and it "
    "alone takes as long to compare as the other fifteen graphs")}


def heldout12_graphs() -> dict:
    """{name: (fn, make_inputs)}, modules built (with seeded weights) on first call."""
    torch.manual_seed(0)
    return {name: build() for name, build in _BUILDERS.items()}
