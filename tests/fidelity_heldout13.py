"""The THIRTEENTH HELD-OUT fidelity suite, written blind: its list of graphs was committed before
any comparison was run on it, by someone who was not tuning the scheduler, while others tuned
on the other suites, so that the figure it gives is that of graphs nobody tuned on.

Decoder layers (one in bfloat16, one with multi-head latent attention), an MoE block, a
language model's sampling step, two training steps, vision classifiers, scene-text
recognition, text detection, speech, time series and a document model, built from the module
code of `transformers` with tiny configs and seeded random weights, from fifteen families used
in none of the other suites (fidelity_graphs, fidelity_tuning_hf, fidelity_heldout ..
fidelity_heldout12) nor in any other test (torchvision and timm are not installed). Small
shapes (batch 2, widths <= 64, sequences <= 32, images <= 32x32, one or two layers), so that
the whole suite compares in about two minutes. Chosen for what real workloads contain, before
anything was measured:

- seed_oss_layer_bf16: Seed-OSS's decoder layer in bfloat16: RMSNorms, biased q/k/v
  projections, rotary, grouped-query attention under a causal mask, SwiGLU.
- minicpm3_layer: MiniCPM3's decoder layer: multi-head latent attention (low-rank q and
  compressed kv projections with their RMSNorms, the rotary part split from the no-rotary part
  and broadcast over heads, concatenated), the depth-scaled residuals, SwiGLU.
- vaultgemma_layer: VaultGemma's decoder layer: Gemma's (1 + weight) RMSNorms, query
  pre-attention scaling, attention logit soft-capping (tanh), rotary, grouped-query
  attention, the GELU-tanh gated MLP.
- lfm2_moe_block: LFM2-MoE's sparse block: a sigmoid router with a per-expert bias used for
  the choice only, top-2 of 8 experts, normalised weights, "batched_mm" SwiGLU experts.
- biogpt_lm_train_step: BioGPT's causal language model TRAINED one step: forward and backward
  (torch.func.grad of the shifted cross-entropy, padding labels -100, every weight's
  gradient): scaled token embeddings, learned positions (offset by 2), two pre-LayerNorm
  layers under a causal and padding mask, the tied LM head.
- ijepa_classifier_train_step: I-JEPA's image classifier TRAINED one step: forward and
  backward (torch.func.grad of the cross-entropy, every weight's gradient) on a 32x32 image:
  conv patch embeddings, no class token, two ViT layers, mean-pooled patches, the head.
- hunyuan_dense_lm_sampling_step: Hunyuan-V1-Dense's causal LM (QK-norm after rotary) and one
  step of sampling's logits processing: the last position's logits, temperature, top-k
  (topk, masked_fill), top-p (sort, softmax, cumsum, scatter), the eta cut-off (entropy,
  sqrt, exp, min), the softmax.
- dinov2_registers_classifier: DINOv2-with-registers' image classifier on a 32x32 image,
  larger than the 16x16 it was configured for (as DINOv2 is used off its pretraining size):
  conv patch embeddings, class token, positions interpolated (bicubic), four register tokens,
  two layers with LayerScale, the head on the class token concatenated with the mean of the
  patch tokens.
- mgp_str_text_recognition: MGP-STR's scene-text recogniser on a 16x32 word crop: ViT layers
  (class token, positions), the three A^3 heads (character, BPE, word-piece: a 1x1-conv token
  learner with LayerNorm, softmax attention over patches, einsum), their classifiers.
- pp_ocrv5_text_detection: PP-OCRv5-mobile's text detector on a 32x32 image: a PP-LCNetV3
  backbone (learnable reparameterised branches: kxk and 1x1 convs with BatchNorm summed,
  learnable affine blocks, hard-swish, squeeze-excitation), the RSE-FPN neck (nearest
  upsampling, adds, concatenation), the DB head (conv transposes, sigmoid probability map).
- wav2vec2_bert_ctc: Wav2Vec2-BERT's CTC speech recogniser on 16 frames of 32 log-mel
  features with a padding mask: the feature projection, two Conformer layers (half-step
  feed-forwards, self-attention with relative_key distances clamped and gathered from an
  embedding table, the conv module: GLU, depthwise conv, LayerNorm, SiLU), the CTC head.
- timesfm2_5_forecast: TimesFM 2.5's forecaster on two series of 32 steps (4 patches of 8),
  the first's first 8 padded: per-patch running mean and standard deviation (Welford's
  update, masked), reversible instance normalisation, the residual-block tokenizer of values
  and mask, two decoder layers (pre- and post-RMSNorms, rotary positions shifted by the
  padded patches, QK-norm, a learned per-dimension softplus query scale, causal and padding
  mask, the residual-block MLP), the point and quantile heads de-normalised. It replaces
  autoformer_forecast (below), on which the comparison crashed before any figure was printed.
- layoutlmv3_token_classifier: LayoutLMv3's token classifier and its loss on a document: 12
  words with their boxes under a padding mask and the page's 32x32 image as patches (conv),
  1-D and 2-D relative-position biases (log-bucketed distances gathered from the bias
  projections' weights), a layer over text and image tokens with CogView's PB-relax softmax,
  the head, the cross-entropy (-100 ignored).
- lxmert_vqa: LXMERT's visual question answering on 8 question tokens under a padding mask and
  6 detected regions (their features and boxes): the language layer, the object-relationship
  layer (features and boxes projected, LayerNormed and averaged), a cross-modality layer
  (cross-attention both ways, self-attention, feed-forwards), the pooler, the answer head.
- qwen2_audio_encoder: Qwen2-Audio's audio encoder on 32 frames of 16 mel bins: two convs with
  GELU (the second strided), the position table added, two pre-LayerNorm layers, average pooling
  by 2, the final LayerNorm.

NOT_COMPILED, replaced after the first run of the comparison crashed on it, before any figure
was printed. Eager runs it and Dynamo captures it in one graph; Inductor's own code for the
device cannot run:

- autoformer_forecast: Autoformer's probabilistic forecaster and its loss, with a Student-t
  output: the mean scaler, lagged subsequences, the series decomposition (moving average by
  1-D average pooling, trend and seasonal parts), auto-correlation attention (FFT of queries
  and keys, inverse FFT, top-k delays, the delayed values gathered and summed under their
  softmax weights), an encoder and a decoder layer, the negative log-likelihood.
  `InductorDeviceError: Inductor's kernel calls libdevice.lgamma, which Triton's interpreter
  cannot run on mtia_sim` (the Student-t log-probability's lgamma, fused into the loss's
  persistent reduction triton_per_fused_..._lgamma_..._32), raised in
  mtia_lab/inductor/triton_launch.py's `run` while `device_plan` (mtia_lab/compare/plans.py)
  ran Inductor's compiled graph, from `fidelity_rows`. Repro:

      fidelity_rows({"autoformer_forecast": _autoformer_forecast()})

libdevice.lgamma (with every other device-library function) runs since d409c25; the graph
stays out of the suite, which was measured without it.

Dropped before this list was committed (before any comparison): vilt_vqa, whose visual
embedding (nonzero, unique over the pixel mask) breaks Dynamo's graph.

Measured blind at 767/809 (95%; 94.8% unrounded) on the tree it was written against (2f7bedb):
Inductor's launches identical to one of ours with our departures off, 9 differing by a
departure that stays on, 5 by a part of Inductor not modelled, 28 unexplained; two graphs
misaligned and counted (NOT_ALIGNED, below: biogpt_lm_train_step, ijepa_classifier_train_step).
Its floor (test_scheduler_fidelity_blind.py) is set from the figures below.

After the comparison's fix, no scheduler change: 763/809 (94%), 9 differing by a departure
that stays on, 5 by a part of Inductor not modelled, 32 unexplained; no graph misaligned.
Both audits failed in the comparison (compare/launches.py), not in the scheduler. biogpt's
DynamicCache cats (empty keys or values, then a layer's) are clones of their one non-empty
input for Inductor's `cat` decomposition, which `remove_noop_ops` removes: the cat and its
empty tensor now go to the launch writing that input, the matmul's, where our plan runs them
as a kernel of their own (it does not drop the empty input), so four launches of biogpt's
identical before (88 of 104, misaligned) differ now (84 of 104: extern_never_fuses names our
side of it). ijepa's copy of the convolution backward's output gradient is now part of our
convolution_backward; its figure stays 101 of 109.

After the round that did not look at it (2026-11-29: a cat onto an empty 1-D cache lowered as
a copy of its piece, an unrolled reduction's loops compared as Inductor's loop reordering
does, realize_hint on a convolution's reused input, host code as a CPU kernel): 763/809
again, graph for graph.

Then tuned on (2026-11-29, second session: reorder_for_locality, dead nodes, a cat of one dense
piece removed as a no-op copy, int64 casts of a summed bool, peak_memory in elements, a
like-factory no reader): 782/809 (97%) on 0a3c8b9, 14 unexplained; biogpt 93/104, ijepa
109/109. The DynamicCache cats are no longer computed at all, as in Inductor. Its floor is 0.96.

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


def _seed_oss_layer_bf16():
    from transformers import SeedOssConfig
    from transformers.models.seed_oss.modeling_seed_oss import (
        SeedOssDecoderLayer,
        SeedOssRotaryEmbedding,
    )

    cfg = SeedOssConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                        head_dim=8, intermediate_size=64, num_hidden_layers=1, vocab_size=64,
                        max_position_embeddings=16, attention_bias=True,
                        attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_seeded_norms(_normal_init(SeedOssDecoderLayer(cfg, 0)), 1.0))
    layer = layer.to(torch.bfloat16)
    rope = _eval(SeedOssRotaryEmbedding(cfg))

    def seed_oss(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, attention_mask=mask, position_ids=position_ids,
                            position_embeddings=rope(x, position_ids)))

    return seed_oss, lambda: (_r(2, 8, 32, dtype=torch.bfloat16), _positions(2, 8))


def _minicpm3_layer():
    from transformers import MiniCPM3Config
    from transformers.models.minicpm3.modeling_minicpm3 import (
        MiniCPM3DecoderLayer,
        MiniCPM3RotaryEmbedding,
    )

    cfg = MiniCPM3Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=4,
                         intermediate_size=64, num_hidden_layers=2, vocab_size=64,
                         max_position_embeddings=16, q_lora_rank=16, kv_lora_rank=16,
                         qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8,
                         scale_depth=1.4, dim_model_base=16, attn_implementation="eager",
                         **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_seeded_norms(_normal_init(MiniCPM3DecoderLayer(cfg, 0)), 1.0))
    rope = _eval(MiniCPM3RotaryEmbedding(cfg))

    def minicpm3(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, attention_mask=mask, position_ids=position_ids,
                            position_embeddings=rope(x, position_ids)))

    return minicpm3, lambda: (_r(2, 8, 32), _positions(2, 8))


def _vaultgemma_layer():
    from transformers import VaultGemmaConfig
    from transformers.models.vaultgemma.modeling_vaultgemma import (
        VaultGemmaDecoderLayer,
        VaultGemmaRotaryEmbedding,
    )

    cfg = VaultGemmaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                           head_dim=8, intermediate_size=64, num_hidden_layers=1, vocab_size=64,
                           max_position_embeddings=16, query_pre_attn_scalar=8,
                           sliding_window=None, layer_types=["full_attention"],
                           attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                           attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_seeded_norms(_normal_init(VaultGemmaDecoderLayer(cfg, 0)), 0.0))
    rope = _eval(VaultGemmaRotaryEmbedding(cfg))

    def vaultgemma(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, attention_mask=mask, position_ids=position_ids,
                            position_embeddings=rope(x, position_ids)))

    return vaultgemma, lambda: (_r(2, 8, 32), _positions(2, 8))


def _lfm2_moe_block():
    from transformers import Lfm2MoeConfig
    from transformers.models.lfm2_moe.modeling_lfm2_moe import Lfm2MoeSparseMoeBlock

    cfg = Lfm2MoeConfig(hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
                        num_experts=8, num_experts_per_tok=2, use_expert_bias=True,
                        norm_topk_prob=True, num_hidden_layers=1, num_attention_heads=4,
                        num_key_value_heads=2, vocab_size=64,
                        experts_implementation="batched_mm", **_NO_SPECIAL_TOKENS)
    block = _normal_init(Lfm2MoeSparseMoeBlock(cfg))
    torch.nn.init.normal_(block.expert_bias, std=0.2)  # the routing bias: zeros when fresh
    block = _eval(block)
    return (lambda x: block(x)), lambda: (_r(2, 8, 32),)


def _biogpt_lm_train_step():
    from transformers import BioGptConfig
    from transformers.models.biogpt.modeling_biogpt import BioGptForCausalLM

    cfg = BioGptConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=64, max_position_embeddings=32,
                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                       activation_dropout=0.0, layerdrop=0.0, pad_token_id=1,
                       attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(BioGptForCausalLM(cfg))
    step = _grad_of(model, lambda out: out.loss)

    def biogpt(input_ids, padding, labels):
        return step(input_ids=input_ids, attention_mask=padding, labels=labels)

    def inputs():  # 16 tokens, the second 5 shorter (its padding ignored by the loss)
        padding = _padding_inputs(16, 5)
        ids = torch.randint(2, 64, (2, 16)).masked_fill(padding == 0, 1)
        return ids, padding, ids.masked_fill(padding == 0, -100)

    return biogpt, inputs


def _ijepa_classifier_train_step():
    from transformers import IJepaConfig
    from transformers.models.ijepa.modeling_ijepa import IJepaForImageClassification

    cfg = IJepaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=64, image_size=32, patch_size=8, num_channels=3,
                      num_labels=5, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                      attn_implementation="eager")
    torch.manual_seed(0)
    model = IJepaForImageClassification(cfg)
    for name, p in model.named_parameters():  # fresh positions: seeded
        if "position_embeddings" in name:
            torch.nn.init.normal_(p, std=0.2)
    model = _eval(model)
    step = _grad_of(model, lambda out: out.loss)

    def ijepa(pixels, labels):
        return step(pixel_values=pixels, labels=labels)

    return ijepa, lambda: (_r(2, 3, 32, 32), torch.tensor([4, 0]))


def _hunyuan_dense_lm_sampling_step():
    from transformers import HunYuanDenseV1Config
    from transformers.generation.logits_process import (
        EtaLogitsWarper,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )
    from transformers.models.hunyuan_v1_dense.modeling_hunyuan_v1_dense import (
        HunYuanDenseV1ForCausalLM,
    )

    cfg = HunYuanDenseV1Config(vocab_size=64, hidden_size=32, intermediate_size=64,
                               num_hidden_layers=1, num_attention_heads=4,
                               num_key_value_heads=2, head_dim=8, max_position_embeddings=32,
                               attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    model = _eval(HunYuanDenseV1ForCausalLM(cfg))
    temperature = TemperatureLogitsWarper(0.7)
    top_k = TopKLogitsWarper(16)
    top_p = TopPLogitsWarper(0.9)
    eta = EtaLogitsWarper(0.01, device="mtia_sim")

    def hunyuan(input_ids):
        scores = model(input_ids=input_ids).logits[:, -1, :].float()
        for warper in (temperature, top_k, top_p, eta):
            scores = warper(input_ids, scores)
        return scores.softmax(-1)

    return hunyuan, lambda: (torch.randint(0, 64, (2, 12)),)


def _dinov2_registers_classifier():
    from transformers import Dinov2WithRegistersConfig
    from transformers.models.dinov2_with_registers.modeling_dinov2_with_registers import (
        Dinov2WithRegistersForImageClassification,
    )

    cfg = Dinov2WithRegistersConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                    mlp_ratio=2, image_size=16, patch_size=8, num_channels=3,
                                    num_register_tokens=4, layerscale_value=0.1, num_labels=5,
                                    attn_implementation="eager")
    torch.manual_seed(0)
    model = Dinov2WithRegistersForImageClassification(cfg)
    for name, p in model.named_parameters():  # fresh tokens and positions: seeded
        if "token" in name or "position_embeddings" in name:
            torch.nn.init.normal_(p, std=0.2)
    model = _eval(model)
    return (lambda pixels: model(pixel_values=pixels).logits), lambda: (_r(2, 3, 32, 32),)


def _mgp_str_text_recognition():
    from transformers import MgpstrConfig
    from transformers.models.mgp_str.modeling_mgp_str import MgpstrForSceneTextRecognition

    cfg = MgpstrConfig(image_size=[16, 32], patch_size=4, num_channels=3, max_token_length=8,
                       num_character_labels=12, num_bpe_labels=24, num_wordpiece_labels=20,
                       hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                       mlp_ratio=2.0)
    torch.manual_seed(0)
    model = MgpstrForSceneTextRecognition(cfg)
    for name, p in model.named_parameters():  # fresh class token and positions: seeded
        if "token" in name or "pos_embed" in name:
            torch.nn.init.normal_(p, std=0.2)
    model = _eval(model)
    return (lambda pixels: tuple(model(pixel_values=pixels).logits)), lambda: (
        _r(2, 3, 16, 32),)


def _pp_ocrv5_text_detection():
    from transformers import PPLCNetV3Config, PPOCRV5MobileDetConfig
    from transformers.models.pp_ocrv5_mobile_det.modeling_pp_ocrv5_mobile_det import (
        PPOCRV5MobileDetForObjectDetection,
    )

    backbone = PPLCNetV3Config(scale=0.5, stem_channels=8, divisor=8, conv_symmetric_num=2,
                               block_configs=[[[3, 8, 16, 1, False]],
                                              [[3, 16, 16, 2, False]],
                                              [[3, 16, 32, 2, False]],
                                              [[5, 32, 32, 2, False]],
                                              [[5, 32, 64, 2, True]]],
                               out_features=["stage2", "stage3", "stage4", "stage5"],
                               out_indices=[2, 3, 4, 5])
    cfg = PPOCRV5MobileDetConfig(backbone_config=backbone, neck_out_channels=16,
                                 layer_list_out_channels=[8, 16, 16, 32])
    torch.manual_seed(0)
    model = _eval(_with_bn_statistics(_normal_init(PPOCRV5MobileDetForObjectDetection(cfg))))
    return (lambda pixels: model(pixel_values=pixels).last_hidden_state), lambda: (
        _r(2, 3, 32, 32),)


def _wav2vec2_bert_ctc():
    from transformers import Wav2Vec2BertConfig
    from transformers.models.wav2vec2_bert.modeling_wav2vec2_bert import Wav2Vec2BertForCTC

    cfg = Wav2Vec2BertConfig(vocab_size=12, hidden_size=32, num_hidden_layers=2,
                             num_attention_heads=4, intermediate_size=64,
                             feature_projection_input_dim=32, hidden_dropout=0.0,
                             activation_dropout=0.0, attention_dropout=0.0,
                             feat_proj_dropout=0.0, final_dropout=0.0, layerdrop=0.0,
                             apply_spec_augment=False, position_embeddings_type="relative_key",
                             left_max_position_embeddings=8, right_max_position_embeddings=4,
                             conv_depthwise_kernel_size=5, conformer_conv_dropout=0.0,
                             pad_token_id=0)
    torch.manual_seed(0)
    model = _eval(Wav2Vec2BertForCTC(cfg))

    def wav2vec2_bert(features, padding):
        return model(input_features=features, attention_mask=padding).logits

    return wav2vec2_bert, lambda: (_r(2, 16, 32), _padding_inputs(16, 4))


def _autoformer_forecast():  # NOT_COMPILED (see the docstring), kept for the record
    from transformers import AutoformerConfig
    from transformers.models.autoformer.modeling_autoformer import AutoformerForPrediction

    cfg = AutoformerConfig(prediction_length=4, context_length=8, lags_sequence=[1, 2, 3],
                           num_time_features=1, input_size=1, d_model=32, encoder_layers=1,
                           decoder_layers=1, encoder_attention_heads=4,
                           decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                           scaling="mean", dropout=0.0, attention_dropout=0.0,
                           activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0,
                           label_length=4, moving_average=5, autocorrelation_factor=1,
                           distribution_output="student_t")
    torch.manual_seed(0)
    model = _eval(AutoformerForPrediction(cfg))

    def autoformer(past_values, past_time, past_observed, future_values, future_time):
        out = model(past_values=past_values, past_time_features=past_time,
                    past_observed_mask=past_observed, future_values=future_values,
                    future_time_features=future_time)
        return out.loss, out.params

    def inputs():  # 8 steps of context and 3 of lags; the second's first 3 unobserved
        observed = torch.ones(2, 11)
        observed[1, :3] = 0
        time = torch.arange(15.0).expand(2, 15)[..., None] / 15
        return (torch.rand(2, 11) * 4, time[:, :11].contiguous(), observed,
                torch.rand(2, 4) * 4, time[:, 11:].contiguous())

    return autoformer, inputs


def _timesfm2_5_forecast():
    from transformers import TimesFm2_5Config
    from transformers.models.timesfm2_5.modeling_timesfm2_5 import TimesFm2_5ModelForPrediction

    cfg = TimesFm2_5Config(patch_length=8, context_length=32, horizon_length=8,
                           num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                           head_dim=8, num_attention_heads=4, num_key_value_heads=4,
                           output_quantile_len=8, max_position_embeddings=32,
                           attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(_seeded_norms(TimesFm2_5ModelForPrediction(cfg), 1.0))

    def timesfm(series, padding):  # the decoder and its point and quantile heads
        return model._decode_and_project(series, padding)[:2]

    def inputs():  # 32 steps (4 patches), the first series' first 8 padded
        padding = torch.zeros(2, 32, dtype=torch.long)
        padding[0, :8] = 1
        return torch.randn(2, 32).cumsum(-1), padding

    return timesfm, inputs


def _layoutlmv3_token_classifier():
    from transformers import LayoutLMv3Config
    from transformers.models.layoutlmv3.modeling_layoutlmv3 import LayoutLMv3ForTokenClassification

    cfg = LayoutLMv3Config(vocab_size=64, hidden_size=32, num_hidden_layers=1,
                           num_attention_heads=4, intermediate_size=64,
                           max_position_embeddings=40, max_2d_position_embeddings=64,
                           coordinate_size=4, shape_size=8, rel_pos_bins=8, max_rel_pos=16,
                           rel_2d_pos_bins=16, max_rel_2d_pos=32, input_size=32, patch_size=8,
                           num_labels=5, pad_token_id=1, hidden_dropout_prob=0.0,
                           attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = _eval(LayoutLMv3ForTokenClassification(cfg))

    def layoutlmv3(input_ids, boxes, padding, pixels, labels):
        out = model(input_ids=input_ids, bbox=boxes, attention_mask=padding,
                    pixel_values=pixels, labels=labels)
        return out.loss, out.logits

    def inputs():  # 12 words with boxes on a 64x64 page, the second 3 shorter, the page image
        padding = _padding_inputs(12, 3)
        corners = torch.randint(0, 32, (2, 12, 2))
        boxes = torch.cat([corners, corners + torch.randint(1, 32, (2, 12, 2))], -1)
        labels = torch.randint(0, 5, (2, 12)).masked_fill(padding == 0, -100)
        ids = torch.randint(3, 64, (2, 12)).masked_fill(padding == 0, 1)
        return ids, boxes * padding[..., None], padding, _r(2, 3, 32, 32), labels

    return layoutlmv3, inputs


def _lxmert_vqa():
    from transformers import LxmertConfig
    from transformers.models.lxmert.modeling_lxmert import LxmertForQuestionAnswering

    cfg = LxmertConfig(vocab_size=64, hidden_size=32, num_attention_heads=4,
                       intermediate_size=64, max_position_embeddings=16, l_layers=1,
                       x_layers=1, r_layers=1, visual_feat_dim=48, visual_pos_dim=4,
                       num_qa_labels=6, hidden_dropout_prob=0.0,
                       attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = _eval(LxmertForQuestionAnswering(cfg))

    def lxmert(input_ids, padding, features, boxes):
        return model(input_ids=input_ids, attention_mask=padding, visual_feats=features,
                     visual_pos=boxes).question_answering_score

    def inputs():  # 8 question tokens (the second 3 shorter), 6 detected regions
        corners = torch.rand(2, 6, 2) * 0.5
        boxes = torch.cat([corners, corners + torch.rand(2, 6, 2) * 0.5], -1)
        return torch.randint(0, 64, (2, 8)), _padding_inputs(8, 3), _r(2, 6, 48), boxes

    return lxmert, inputs


def _qwen2_audio_encoder():
    from transformers.models.qwen2_audio.configuration_qwen2_audio import (
        Qwen2AudioEncoderConfig,
    )
    from transformers.models.qwen2_audio.modeling_qwen2_audio import Qwen2AudioEncoder

    cfg = Qwen2AudioEncoderConfig(num_mel_bins=16, encoder_layers=2, encoder_attention_heads=4,
                                  encoder_ffn_dim=64, d_model=32, max_source_positions=16,
                                  dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                                  attn_implementation="eager")
    torch.manual_seed(0)
    encoder = Qwen2AudioEncoder(cfg)
    encoder = _eval(encoder)
    return (lambda features: encoder(features).last_hidden_state), lambda: (_r(2, 16, 32),)


_BUILDERS = {
    "seed_oss_layer_bf16": _seed_oss_layer_bf16,
    "minicpm3_layer": _minicpm3_layer,
    "vaultgemma_layer": _vaultgemma_layer,
    "lfm2_moe_block": _lfm2_moe_block,
    "biogpt_lm_train_step": _biogpt_lm_train_step,
    "ijepa_classifier_train_step": _ijepa_classifier_train_step,
    "hunyuan_dense_lm_sampling_step": _hunyuan_dense_lm_sampling_step,
    "dinov2_registers_classifier": _dinov2_registers_classifier,
    "mgp_str_text_recognition": _mgp_str_text_recognition,
    "pp_ocrv5_text_detection": _pp_ocrv5_text_detection,
    "wav2vec2_bert_ctc": _wav2vec2_bert_ctc,
    "timesfm2_5_forecast": _timesfm2_5_forecast,
    "layoutlmv3_token_classifier": _layoutlmv3_token_classifier,
    "lxmert_vqa": _lxmert_vqa,
    "qwen2_audio_encoder": _qwen2_audio_encoder,
}

# Graphs whose audit fails, kept in the suite (their launches counted in its figure): none. The
# blind run (2f7bedb) failed two, both in the comparison (compare/launches.py), both fixed
# there: biogpt_lm_train_step's DynamicCache cats of an empty tensor and the new keys, which
# Inductor's `cat` decomposition makes a clone of the keys that `remove_noop_ops` removes (no
# launch: `_cat_of_one`, the cat is its input's value), and ijepa_classifier_train_step's
# contiguous copy of the convolution backward's output gradient, whose origins are all
# inherited from the buffer it copies (`_copied_for_extern`: part of convolution_backward).
NOT_ALIGNED: dict[str, str] = {}

# Graphs our compiler or the comparison failed on when the suite was written (see the module
# docstring), kept for the record: replaced before any figure of theirs was seen.
NOT_COMPILED = {"autoformer_forecast": (
    "Inductor's compiled graph cannot run on the device: its kernel for the Student-t "
    "negative log-likelihood calls libdevice.lgamma, which Triton's interpreter cannot run "
    "on mtia_sim (InductorDeviceError in mtia_lab/inductor/triton_launch.py, from "
    "device_plan in mtia_lab/compare/plans.py <- fidelity_rows); no figure was printed")}


def heldout13_graphs() -> dict:
    """{name: (fn, make_inputs)}, modules built (with seeded weights) on first call."""
    torch.manual_seed(0)
    return {name: build() for name, build in _BUILDERS.items()}
