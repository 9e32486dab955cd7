"""The ELEVENTH HELD-OUT fidelity suite, written blind: its list of graphs was committed before
any comparison was run on it, by someone who was not tuning the scheduler, while others tuned
on the other suites, so that the figure it gives is that of graphs nobody tuned on.

Decoder layers, an MoE block, a state-space layer, vision, segmentation, detection, video,
speech, time-series, text encoders, a translation model and three training steps, built from
the module code of `transformers` with tiny configs and seeded random weights, from fifteen
families used in none of the other suites (fidelity_graphs, fidelity_tuning_hf,
fidelity_heldout .. fidelity_heldout10) nor in any other test (torchvision and timm are not
installed). Small shapes (batch 2, widths <= 64, sequences <= 32, images <= 32x32, one to
three layers), so that the whole suite compiles in about a minute and a half at most. Chosen
for what real workloads contain, before anything was measured:

- cohere2_layer_bf16: Cohere 2's (Command R7B / A) decoder layer in bfloat16, a local
  (sliding-window, 4) layer: one LayerNorm feeding attention and MLP in parallel, both added
  to the residual, interleaved rotary, grouped-query attention, SwiGLU.
- nanochat_layer_train_step: nanochat's decoder layer TRAINED one step: forward and backward
  (torch.func.grad of an MSE loss, every weight's gradient); weightless RMSNorms, QK-norm,
  rotary, grouped-query attention, the ReLU-squared MLP.
- gpt_bigcode_lm_train_step: GPT-BigCode's (StarCoder 1) causal language model TRAINED one
  step: forward and backward (torch.func.grad of the shifted cross-entropy, padding labels
  -100, every weight's gradient); multi-query attention under a padding mask, learned
  positions, two pre-LN GELU blocks, the tied LM head.
- ernie4_5_moe_block: ERNIE 4.5's MoE block: a float32 softmax router, top-2 of 8 experts
  chosen on the scores plus a correction bias, the weights gathered and renormalised
  (clamped), "batched_mm" experts, a shared SwiGLU expert.
- zamba_mamba_layer: Zamba's Mamba layer (state space), its PyTorch path: RMSNorm, the in
  projection, a causal depthwise conv1d with SiLU, two Mamba heads (the x projection, dt, B
  and C per head), softplus dt, the selective scan over 8 steps, the gate, the out
  projection, the residual.
- pvt_classifier: the Pyramid Vision Transformer (v1) classifier on a 32x32 image: strided
  conv patch embeddings with LayerNorm and learned positions, spatial-reduction attention
  (a strided conv and LayerNorm on keys and values), a class token at the last stage, the
  head.
- data2vec_vision_segmentation: data2vec-vision's semantic segmentation on a 32x32 image: a
  BEiT-style backbone (relative position bias, layer scale, three layers), the feature
  pyramid (transposed convs with BatchNorm and GELU, identity, max pooling), the UperNet head
  (pyramid pooling by adaptive average pooling 1/2/3/6, bilinear upsampling, 3x3 conv,
  BatchNorm, ReLU, the top-down FPN path), the classifier.
- table_transformer_detection: Table Transformer's detector (DETR family) on a 32x32 image
  with a pixel mask: a ResNet backbone (frozen BatchNorms, max pooling), the mask
  interpolated to the feature map, sine positions (cumsum of the mask), one encoder and one
  decoder layer with 5 object queries, the class head and the box MLP (sigmoid).
- wav2vec2_conformer_encoder: wav2vec 2.0 Conformer's speech encoder on 400 samples with a
  padding mask: the conv feature encoder (three strided conv1d with LayerNorm and GELU), the
  feature projection, relative positional encoding (Transformer-XL style, the relative shift),
  a Conformer block (two half-step feed-forwards, self-attention, the convolution module:
  pointwise conv, GLU, depthwise conv, BatchNorm, SiLU), the final LayerNorm.
- time_series_transformer_normal_forecast: the Time Series Transformer's probabilistic
  forecaster and its loss, with a Normal output: the mean scaler over observed values, lagged
  subsequences, time features, an encoder and a decoder layer, the Normal head's parameters
  (softplus scale) and the mean negative log-likelihood of the future values. It replaces
  time_series_transformer_forecast (below, the same model with its default Student-t output),
  on which the comparison crashed before any figure was printed.
- megatron_bert_mlm_train_step: Megatron-BERT's masked language model TRAINED one step:
  forward and backward (torch.func.grad of its cross-entropy over the masked tokens, -100
  ignored, every weight's gradient); word, position and two-segment token-type embeddings,
  two PRE-LN layers (Megatron's departure from BERT) under a padding mask, the final
  LayerNorm, the tied LM head. It replaces roberta_mlm_train_step (below), before any
  comparison was run.
- deberta_classifier: DeBERTa's (v1) sequence classifier on 16 tokens with a padding mask:
  disentangled attention (content-to-position and position-to-content scores gathered from
  relative positions), the masked softmax, the context pooler, the head.
- canine_encoder: CANINE's character encoder on 32 Unicode code points with a padding mask:
  hash embeddings (codepoints hashed by multiply and modulo into several tables), a local
  transformer layer (attention in blocks of 8), strided conv downsampling by 4 with the
  [CLS] character joined on and LayerNorm, the deep transformer layer, upsampling by
  repeat_interleave, the final conv and local layer, the pooler.
- vivit_video_classifier: ViViT's video classifier on 4 frames of 16x16: tubelet embeddings by
  a Conv3d (2x4x4), a class token, positions, one layer, LayerNorm, the head.
- marian_translation: MarianMT's translation model and its loss: a 12-token source under a
  padding mask, the labels shifted right into decoder inputs (-100 replaced by the pad),
  sinusoidal positions, an encoder and a decoder layer (causal self-attention and
  cross-attention), the tied LM head with its final logits bias, the cross-entropy.

NOT_CAPTURED, replaced before any comparison was run (eager runs it; Dynamo's fullgraph
capture, the comparison's first step, fails on it):

- mimi_codec: Mimi's neural audio codec (Kyutai) on 256 samples: the SEANet encoder, a
  transformer layer, downsampling, the split residual vector quantizer (nearest codes by
  distance, argmin), the decoder. MimiConv1d keeps its padding as tensor buffers
  (held-out-7's encodec_resnet_block failed the same way): "PendingUnbackedSymbolNotFound:
  Pending unbacked symbols {u0, u1} not in returned outputs" for the padded length.
  Repro: `torch.compile(fn, backend="eager", fullgraph=True)(*inputs)` with
  `fn, make = _mimi_codec()`; `fn(*inputs)` runs.

Replaced before any comparison, not for a failure: roberta_mlm_train_step (RoBERTa's masked
language model trained one step, kept below for the record): RoBERTa's positions from the
cumsum of non-padding tokens are already a hand-written graph of the tuning suite
(fidelity_graphs.roberta_positions), so the family is not unseen.

NOT_COMPILED, replaced after the first run of the comparison (the blind test's fixture)
crashed on it, before any figure was printed. Our compiler compiles it (eager runs it, Dynamo
captures it in one graph); the comparison's compile of our aten graph by Inductor fails:

- time_series_transformer_forecast: the Time Series Transformer as above with its default
  Student-t output, whose negative log-likelihood calls lgamma. Inductor's fused reduction
  kernel of the loss calls `libdevice.lgamma`, and `device_plan` (mtia_lab/compare/plans.py)
  runs Inductor's kernels on mtia_sim through Triton's interpreter, which cannot: "mtia_lab.
  inductor.errors.InductorDeviceError: Inductor's kernel calls libdevice.lgamma, which
  Triton's interpreter cannot run on mtia_sim (no device library on the host)" (kernel
  triton_per_fused_abs_add_addmm_clamp_div_expand_full_like_lgamma_log_log1p_..._sum_where).
  Repro (our compiler alone runs it, `backend="mtia_lab"`):

      fidelity_rows({"lgamma": (lambda x: torch.lgamma(x * 2 + 1).sum(),
                                lambda: (torch.rand(8),))})  # fails

  or `fidelity_rows({"time_series_transformer_forecast": _time_series_transformer_forecast()})`.

The training steps differentiate with `torch.func.grad` inside the compiled function, so that
forward and backward are one graph (the comparison compiles one graph per entry). Each entry:
a function of tensors and a maker of small CPU inputs. Do not change the scheduler's rules
while looking at these graphs: the figure is only honest while no rule was tuned against
them."""

import torch
from fidelity_heldout import _eval, _first, _positions, _r
from fidelity_heldout4 import _normal_init
from fidelity_heldout5 import _with_bn_statistics
from fidelity_heldout6 import _decoder_train_step
from fidelity_heldout7 import _padding_inputs
from fidelity_heldout9 import _NO_SPECIAL_TOKENS, _seeded_norms
from fidelity_heldout10 import _grad_of


def _cohere2_layer_bf16():
    from transformers import Cohere2Config
    from transformers.models.cohere2.modeling_cohere2 import (
        Cohere2DecoderLayer,
        Cohere2RotaryEmbedding,
    )

    cfg = Cohere2Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                        intermediate_size=64, num_hidden_layers=2, vocab_size=64,
                        max_position_embeddings=16, sliding_window=4,
                        layer_types=["sliding_attention", "full_attention"],
                        attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_seeded_norms(_normal_init(Cohere2DecoderLayer(cfg, 0)), 1.0))
    layer = layer.to(torch.bfloat16)
    rope = _eval(Cohere2RotaryEmbedding(cfg))

    def cohere2(x, position_ids):
        # the sliding-window mask (window 4) of a local layer, as in held-out-10's gemma2
        length = x.shape[1]
        rows = torch.arange(length, device=x.device)
        keep = (rows[None, :] <= rows[:, None]) & (rows[:, None] - rows[None, :] < 4)
        mask = torch.where(keep, 0.0, torch.finfo(x.dtype).min).to(x.dtype)[None, None]
        return _first(layer(x, rope(x, position_ids), mask))

    return cohere2, lambda: (_r(2, 8, 32, dtype=torch.bfloat16), _positions(2, 8))


def _nanochat_layer_train_step():
    from transformers import NanoChatConfig
    from transformers.models.nanochat.modeling_nanochat import (
        NanoChatDecoderLayer,
        NanoChatRotaryEmbedding,
    )

    cfg = NanoChatConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                         intermediate_size=64, num_hidden_layers=1, vocab_size=64,
                         max_position_embeddings=16, attn_implementation="eager",
                         **_NO_SPECIAL_TOKENS)
    layer = _eval(_normal_init(NanoChatDecoderLayer(cfg, 0)))
    return _decoder_train_step(layer, _eval(NanoChatRotaryEmbedding(cfg)))


def _gpt_bigcode_lm_train_step():
    from transformers import GPTBigCodeConfig
    from transformers.models.gpt_bigcode.modeling_gpt_bigcode import GPTBigCodeForCausalLM

    cfg = GPTBigCodeConfig(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=4,
                           n_inner=64, multi_query=True, resid_pdrop=0.0, embd_pdrop=0.0,
                           attn_pdrop=0.0, attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    model = _eval(GPTBigCodeForCausalLM(cfg))
    step = _grad_of(model, lambda out: out.loss)

    def gpt_bigcode(input_ids, padding, labels):
        return step(input_ids=input_ids, attention_mask=padding, labels=labels)

    def inputs():  # 16 tokens, the second 4 shorter (its padding ignored by the loss)
        padding = _padding_inputs(16, 4)
        ids = torch.randint(0, 64, (2, 16)) * padding
        return ids, padding, ids.masked_fill(padding == 0, -100)

    return gpt_bigcode, inputs


def _ernie4_5_moe_block():
    from transformers import Ernie4_5_MoeConfig
    from transformers.models.ernie4_5_moe.modeling_ernie4_5_moe import (
        Ernie4_5_MoeSparseMoeBlock,
    )

    cfg = Ernie4_5_MoeConfig(hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
                             moe_num_experts=8, moe_k=2, moe_num_shared_experts=1,
                             num_hidden_layers=1, num_attention_heads=4, vocab_size=64,
                             experts_implementation="batched_mm", **_NO_SPECIAL_TOKENS)
    block = _eval(_normal_init(Ernie4_5_MoeSparseMoeBlock(cfg)))
    return (lambda x: block(x)), lambda: (_r(2, 8, 32),)


def _zamba_mamba_layer():
    from transformers import ZambaConfig
    from transformers.models.zamba.modeling_zamba import ZambaMambaDecoderLayer

    cfg = ZambaConfig(hidden_size=32, mamba_d_state=8, mamba_expand=2, mamba_d_conv=4,
                      n_mamba_heads=2, mamba_dt_rank=4, num_hidden_layers=1, vocab_size=64,
                      intermediate_size=64, attention_hidden_size=64, num_attention_heads=4,
                      num_key_value_heads=4, layers_block_type=["linear_attention"],
                      use_mamba_kernels=False, **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_seeded_norms(ZambaMambaDecoderLayer(cfg, 0), 1.0))
    return (lambda x: _first(layer(x))), lambda: (_r(2, 8, 32),)


def _pvt_classifier():
    from transformers import PvtConfig
    from transformers.models.pvt.modeling_pvt import PvtForImageClassification

    cfg = PvtConfig(image_size=32, num_channels=3, num_encoder_blocks=2, depths=[1, 1],
                    sequence_reduction_ratios=[2, 1], hidden_sizes=[16, 32],
                    patch_sizes=[4, 2], strides=[4, 2], num_attention_heads=[1, 2],
                    mlp_ratios=[2, 2], num_labels=5)
    torch.manual_seed(0)
    model = PvtForImageClassification(cfg)
    for name, p in model.named_parameters():  # fresh position embeddings: seeded
        if "position_embeddings" in name or "cls_token" in name:
            torch.nn.init.normal_(p, std=0.2)
    model = _eval(model)
    return (lambda pixels: model(pixel_values=pixels).logits), lambda: (_r(2, 3, 32, 32),)


def _data2vec_vision_segmentation():
    from transformers import Data2VecVisionConfig
    from transformers.models.data2vec.modeling_data2vec_vision import (
        Data2VecVisionForSemanticSegmentation,
    )

    cfg = Data2VecVisionConfig(hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                               intermediate_size=64, image_size=32, patch_size=8,
                               use_relative_position_bias=True, out_indices=[1, 2, 3, 4],
                               pool_scales=[1, 2, 3, 6], use_auxiliary_head=False, num_labels=4,
                               layer_scale_init_value=0.1, attn_implementation="eager")
    torch.manual_seed(0)
    model = Data2VecVisionForSemanticSegmentation(cfg)
    for name, p in model.named_parameters():  # relative position tables: zeros when fresh
        if "relative_position_bias_table" in name:
            torch.nn.init.normal_(p, std=0.2)
    model = _eval(_with_bn_statistics(model))
    return (lambda pixels: model(pixel_values=pixels).logits), lambda: (_r(2, 3, 32, 32),)


def _table_transformer_detection():
    from transformers import ResNetConfig, TableTransformerConfig
    from transformers.models.table_transformer.modeling_table_transformer import (
        TableTransformerForObjectDetection,
    )

    backbone = ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                            layer_type="basic", out_features=["stage2"])
    cfg = TableTransformerConfig(use_timm_backbone=False, backbone_config=backbone,
                                 use_pretrained_backbone=False, d_model=32, encoder_layers=1,
                                 decoder_layers=1, encoder_attention_heads=4,
                                 decoder_attention_heads=4, encoder_ffn_dim=64,
                                 decoder_ffn_dim=64, num_queries=5, num_labels=3,
                                 dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    torch.manual_seed(0)
    model = TableTransformerForObjectDetection(cfg)
    torch.manual_seed(0)
    for name, buf in model.named_buffers():  # frozen BatchNorms' statistics: seeded
        if name.endswith("running_mean"):
            buf.normal_(std=0.2)
        elif name.endswith("running_var"):
            buf.uniform_(0.5, 1.5)
    model = _eval(model)

    def table_transformer(pixels, pixel_mask):
        out = model(pixel_values=pixels, pixel_mask=pixel_mask)
        return out.logits, out.pred_boxes

    def inputs():  # the second image padded: its right 8 columns masked
        pixel_mask = torch.ones(2, 32, 32, dtype=torch.long)
        pixel_mask[1, :, 24:] = 0
        return _r(2, 3, 32, 32), pixel_mask

    return table_transformer, inputs


def _mimi_codec():  # NOT_CAPTURED (see the docstring), kept for the record
    from transformers import MimiConfig
    from transformers.models.mimi.modeling_mimi import MimiModel

    cfg = MimiConfig(hidden_size=32, num_filters=8, num_residual_layers=1,
                     upsampling_ratios=[4, 2], kernel_size=7, last_kernel_size=3,
                     residual_kernel_size=3, compress=2, codebook_size=16,
                     codebook_dim=8, num_quantizers=4, num_semantic_quantizers=1,
                     vector_quantization_hidden_dimension=8, num_hidden_layers=1,
                     num_attention_heads=4, num_key_value_heads=4, head_dim=8,
                     intermediate_size=64, sliding_window=16, frame_rate=500, upsample_groups=32,
                     sampling_rate=8000, use_causal_conv=True, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(_normal_init(MimiModel(cfg)))

    def mimi(waveform):
        out = model(input_values=waveform)
        return out.audio_codes, out.audio_values

    return mimi, lambda: (_r(2, 1, 256),)


def _wav2vec2_conformer_encoder():
    from transformers import Wav2Vec2ConformerConfig
    from transformers.models.wav2vec2_conformer.modeling_wav2vec2_conformer import (
        Wav2Vec2ConformerModel,
    )

    cfg = Wav2Vec2ConformerConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                  intermediate_size=64, conv_dim=(16, 16, 16),
                                  conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                                  feat_extract_norm="layer", conv_bias=True,
                                  position_embeddings_type="relative",
                                  max_source_positions=64, conv_depthwise_kernel_size=7,
                                  hidden_dropout=0.0, attention_dropout=0.0,
                                  activation_dropout=0.0, feat_proj_dropout=0.0,
                                  layerdrop=0.0, mask_time_prob=0.0,
                                  attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(_with_bn_statistics(Wav2Vec2ConformerModel(cfg), torch.nn.BatchNorm1d))

    def wav2vec2_conformer(waveform, padding):
        return model(input_values=waveform, attention_mask=padding).last_hidden_state

    # 400 samples (19 frames after the feature encoder's strides), the second 100 shorter
    return wav2vec2_conformer, lambda: (_r(2, 400), _padding_inputs(400, 100))


def _time_series_transformer_forecast(distribution: str = "student_t"):  # NOT_COMPILED (student_t)
    from transformers import TimeSeriesTransformerConfig
    from transformers.models.time_series_transformer.modeling_time_series_transformer import (
        TimeSeriesTransformerForPrediction,
    )

    cfg = TimeSeriesTransformerConfig(prediction_length=4, context_length=8,
                                      lags_sequence=[1, 2, 3], num_time_features=1,
                                      input_size=1, d_model=32, encoder_layers=1,
                                      decoder_layers=1, encoder_attention_heads=4,
                                      decoder_attention_heads=4, encoder_ffn_dim=64,
                                      decoder_ffn_dim=64, scaling="mean", dropout=0.0,
                                      attention_dropout=0.0, activation_dropout=0.0,
                                      encoder_layerdrop=0.0, decoder_layerdrop=0.0,
                                      distribution_output=distribution)
    torch.manual_seed(0)
    model = _eval(TimeSeriesTransformerForPrediction(cfg))

    def time_series(past_values, past_time, past_observed, future_values, future_time):
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

    return time_series, inputs


def _time_series_transformer_normal_forecast():
    return _time_series_transformer_forecast("normal")


def _megatron_bert_mlm_train_step():
    from transformers import MegatronBertConfig
    from transformers.models.megatron_bert.modeling_megatron_bert import (
        MegatronBertForMaskedLM,
    )

    cfg = MegatronBertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                             num_attention_heads=4, intermediate_size=64,
                             max_position_embeddings=32, type_vocab_size=2, pad_token_id=0,
                             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = _eval(MegatronBertForMaskedLM(cfg))
    step = _grad_of(model, lambda out: out.loss)

    def megatron_bert(input_ids, padding, token_types, labels):
        return step(input_ids=input_ids, attention_mask=padding, token_type_ids=token_types,
                    labels=labels)

    def inputs():  # 16 tokens, two segments, the second 5 shorter; 4 masked (id 3), rest -100
        padding = _padding_inputs(16, 5)
        ids = torch.randint(4, 64, (2, 16)) * padding
        token_types = torch.zeros(2, 16, dtype=torch.long)
        token_types[:, 8:] = 1
        labels = torch.full((2, 16), -100)
        labels[:, [2, 4, 7, 9]] = ids[:, [2, 4, 7, 9]]
        return ids.masked_fill(labels != -100, 3), padding, token_types * padding, labels

    return megatron_bert, inputs


def _deberta_classifier():
    from transformers import DebertaConfig
    from transformers.models.deberta.modeling_deberta import DebertaForSequenceClassification

    cfg = DebertaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=4, intermediate_size=64,
                        max_position_embeddings=32, relative_attention=True,
                        pos_att_type=["c2p", "p2c"], max_relative_positions=16,
                        num_labels=3, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, pad_token_id=0)
    torch.manual_seed(0)
    model = _eval(DebertaForSequenceClassification(cfg))

    def deberta(input_ids, padding):
        return model(input_ids=input_ids, attention_mask=padding).logits

    def inputs():
        padding = _padding_inputs(16, 6)
        return torch.randint(1, 64, (2, 16)) * padding, padding

    return deberta, inputs


def _canine_encoder():
    from transformers import CanineConfig
    from transformers.models.canine.modeling_canine import CanineModel

    cfg = CanineConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                       intermediate_size=64, max_position_embeddings=64,
                       downsampling_rate=4, upsampling_kernel_size=4, num_hash_functions=2,
                       num_hash_buckets=64, local_transformer_stride=8,
                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = _eval(CanineModel(cfg))

    def canine(codepoints, padding):
        out = model(input_ids=codepoints, attention_mask=padding)
        return out.last_hidden_state, out.pooler_output

    def inputs():  # 32 Unicode code points, the second 7 shorter
        padding = _padding_inputs(32, 7)
        return torch.randint(32, 0x3000, (2, 32)) * padding, padding

    return canine, inputs


def _vivit_video_classifier():
    from transformers import VivitConfig
    from transformers.models.vivit.modeling_vivit import VivitForVideoClassification

    cfg = VivitConfig(image_size=16, num_frames=4, tubelet_size=[2, 4, 4], num_channels=3,
                      hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                      intermediate_size=64, num_labels=5, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(VivitForVideoClassification(cfg))
    return (lambda video: model(pixel_values=video).logits), lambda: (_r(2, 4, 3, 16, 16),)


def _marian_translation():
    from transformers import MarianConfig
    from transformers.models.marian.modeling_marian import MarianMTModel

    cfg = MarianConfig(vocab_size=64, d_model=32, encoder_layers=1, decoder_layers=1,
                       encoder_attention_heads=4, decoder_attention_heads=4,
                       encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=32,
                       pad_token_id=63, decoder_start_token_id=63, eos_token_id=0,
                       bos_token_id=None, dropout=0.0, attention_dropout=0.0,
                       activation_dropout=0.0, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(MarianMTModel(cfg))

    def marian(input_ids, padding, labels):
        out = model(input_ids=input_ids, attention_mask=padding, labels=labels)
        return out.logits, out.loss

    def inputs():  # a 12-token source (the second 3 shorter, pad 63), a 10-token target
        padding = _padding_inputs(12, 3)
        ids = torch.where(padding == 1, torch.randint(1, 63, (2, 12)), 63)
        labels = torch.randint(1, 63, (2, 10))
        labels[1, 7:] = -100
        return ids, padding, labels

    return marian, inputs


_BUILDERS = {
    "cohere2_layer_bf16": _cohere2_layer_bf16,
    "nanochat_layer_train_step": _nanochat_layer_train_step,
    "gpt_bigcode_lm_train_step": _gpt_bigcode_lm_train_step,
    "ernie4_5_moe_block": _ernie4_5_moe_block,
    "zamba_mamba_layer": _zamba_mamba_layer,
    "pvt_classifier": _pvt_classifier,
    "data2vec_vision_segmentation": _data2vec_vision_segmentation,
    "table_transformer_detection": _table_transformer_detection,
    "wav2vec2_conformer_encoder": _wav2vec2_conformer_encoder,
    "time_series_transformer_normal_forecast": _time_series_transformer_normal_forecast,
    "megatron_bert_mlm_train_step": _megatron_bert_mlm_train_step,
    "deberta_classifier": _deberta_classifier,
    "canine_encoder": _canine_encoder,
    "vivit_video_classifier": _vivit_video_classifier,
    "marian_translation": _marian_translation,
}

# Graphs whose audit fails for a reason in the comparison, found by the blind test's first
# complete run (before the measurement): the blind test checks the others' alignment and
# xfails on these. time_series_transformer_normal_forecast was here: Inductor's foreach
# kernel triton_for_fused_0 (the copies of past_values and future_values into one cat
# buffer, 2 sub-kernels) is launched once by the wrapper and was counted as two launches
# (65 != the wrapper's 64); the audit now counts a combo's groups as its one launch.
NOT_ALIGNED: dict = {}

# Graphs Dynamo cannot capture, so that neither compiler is given them (see the docstring).
NOT_CAPTURED = {"mimi_codec": (
    "MimiConv1d's padding is computed from tensor buffers (padding_total): Dynamo's fullgraph "
    "capture fails with PendingUnbackedSymbolNotFound (unbacked symbols of the padded length)")}

# Graphs our compiler or the comparison failed on when the suite was written (see the module
# docstring), kept for the record: replaced before any figure of theirs was seen.
NOT_COMPILED = {"time_series_transformer_forecast": (
    "device_plan runs Inductor's kernels through Triton's interpreter, which cannot run "
    "libdevice.lgamma (the Student-t negative log-likelihood): InductorDeviceError")}


def heldout11_graphs() -> dict:
    """{name: (fn, make_inputs)}, modules built (with seeded weights) on first call."""
    torch.manual_seed(0)
    return {name: build() for name, build in _BUILDERS.items()}


def _roberta_mlm_train_step():  # replaced before any comparison (see the docstring)
    from transformers import RobertaConfig
    from transformers.models.roberta.modeling_roberta import RobertaForMaskedLM

    cfg = RobertaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64,
                        max_position_embeddings=40, type_vocab_size=1, pad_token_id=1,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                        attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(RobertaForMaskedLM(cfg))
    step = _grad_of(model, lambda out: out.loss)

    def roberta(input_ids, padding, labels):
        return step(input_ids=input_ids, attention_mask=padding, labels=labels)

    def inputs():  # 16 tokens, the second 5 shorter (pad id 1); 4 masked (id 3), rest -100
        padding = _padding_inputs(16, 5)
        ids = torch.where(padding == 1, torch.randint(4, 64, (2, 16)), 1)
        labels = torch.full((2, 16), -100)
        labels[:, [2, 4, 7, 9]] = ids[:, [2, 4, 7, 9]]
        return ids.masked_fill(labels != -100, 3), padding, labels

    return roberta, inputs
