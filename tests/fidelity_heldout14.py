"""The FOURTEENTH HELD-OUT fidelity suite, written blind: its list of graphs was committed before
any comparison was run on it, by someone who was not tuning the scheduler, while others tuned on
the other suites, so that the figure it gives is that of graphs nobody tuned on.

Decoder layers (one in bfloat16, one with sliding-window attention and attention sinks), an MoE
block with group-limited routing, a language model's sampling step, two training steps, vision
encoders, an in-context segmenter, a speech recogniser, a text-to-speech acoustic model, an
audio classifier, a document model and a video-text contrastive model, built from the module
code of `transformers` with tiny configs and seeded random weights, from fifteen families used
in none of the other suites (fidelity_graphs, fidelity_tuning_hf, fidelity_heldout ..
fidelity_heldout13) nor in any other test (torchvision and timm are not installed; every
time-series family of `transformers` is in an earlier suite, so there is none here). Some are
new members of a line an earlier suite took another member of, with modules of their own:
Ministral 3 (Ministral: held-out-12), Granite-SWA (Granite: held-out-7), X-CLIP (CLIP:
held-out). Small shapes (batch 2, widths <= 64, sequences <= 32, images <= 32x32, one or two
layers), so that the whole suite compares in about two minutes. Chosen for what real workloads
contain, before anything was measured:

- ministral3_layer_bf16: Ministral 3's decoder layer in bfloat16: RMSNorms, YaRN rotary,
  Llama-4's position-dependent query scaling (1 + beta log(1 + floor(pos / original))),
  grouped-query attention under a causal mask, SwiGLU.
- jais2_layer: Jais 2's decoder layer: LayerNorms, biased q/k/v/o projections, rotary,
  attention under a causal mask, the biased squared-ReLU MLP (no gate).
- granite_swa_layer: Granite-SWA's sliding-window layer on 12 tokens: RMSNorms, rotary,
  grouped-query attention under a window-4 causal mask with a learned per-head attention sink
  (an extra softmax logit), Granite's attention and residual multipliers, SwiGLU.
- dots1_moe_block: dots.llm1's MoE block: a sigmoid router with a score-correction bias for
  the choice only, group-limited top-k (top-2 of 4 groups by the sum of their top-2 scores,
  scatter into a group mask, masked_fill), top-2 of 8 experts, normalised and scaled weights,
  "batched_mm" SwiGLU experts, plus a shared expert.
- xglm_lm_train_step: XGLM's causal language model TRAINED one step: forward and backward
  (torch.func.grad of the shifted cross-entropy, padding labels -100, every weight's
  gradient): scaled token embeddings, sinusoidal positions (a table offset by 2, gathered),
  two pre-LayerNorm layers (GELU feed-forwards) under a causal and padding mask, the tied
  LM head.
- videomae_classifier_train_step: VideoMAE's video classifier TRAINED one step: forward and
  backward (torch.func.grad of the cross-entropy, every weight's gradient) on 4 frames of
  16x16: tubelet embeddings (a 3-D conv over 2 frames), fixed sinusoidal positions, two ViT
  layers, the mean of the tokens, fc_norm LayerNorm, the head.
- cwm_lm_sampling_step: CWM's causal LM (Llama-3 rotary scaling, grouped-query attention) and
  one step of sampling's logits processing: the last position's logits, repetition penalty
  (the seen tokens' scores gathered from the padded scores, where, scatter), temperature,
  top-k (topk, masked_fill), min-p (softmax, amax, the scaled threshold, the top token kept
  by topk and scatter, masked_fill), the softmax.
- aimv2_vision_pooled: AIMv2's vision encoder on a 32x32 image: conv patch embeddings
  RMSNormed, learned positions, two layers (RMSNorms, SwiGLU), the final RMSNorm, the
  attention-pooling head (a learned class-token query attending to every patch, averaged over
  heads, projected).
- mlcd_vision_model: MLCD's vision encoder on a 32x32 image: conv patch embeddings, a class
  token, 2-D rotary positions (row and column frequencies, the class token's own), the
  pre-LayerNorm, two CLIP-style layers (GELU MLP), the post-LayerNormed class token.
- seggpt_in_context_segmentation: SegGPT's in-context segmenter: a 16x16 image and a prompt
  image with its painted mask, as two 32x16 canvases (the prompt image over the image, the
  prompt mask over the target, whose patches are replaced by the mask token), patch
  embeddings, positions interpolated (bicubic), segment and type tokens, the two streams
  averaged after the first layer, two ViT layers with decomposed relative positions, the
  decoder on the layers' concatenated LayerNormed features (a linear, the patches unfolded
  to pixels, conv, LayerNorm, GELU, 1x1 conv) predicting the masks. It replaces
  rf_detr_detector (below), on which our compiler crashed before any comparison was run.
- lasr_ctc: LASR's CTC speech recogniser on 32 frames of 16 log-mel features with a padding
  mask: the subsampling (a linear, two strided 1-D convs, a linear), two Conformer-style
  layers (macaron feed-forwards with weighted residuals 1.5/0.5, rotary self-attention under
  the padding mask, the conv module: GLU, depthwise conv, BatchNorm, SiLU), the CTC head as
  a 1x1 conv.
- bark_fine_acoustics: Bark's fine acoustics model (text-to-speech's last stage) on 32 frames
  of 4 EnCodec codebooks: the embeddings of the codebooks given summed (cat, slice, sum),
  learned positions, two non-causal pre-LayerNorm GPT blocks (GELU MLP), the final
  LayerNorm, the third codebook's head. It replaces moonshine_streaming_encoder (below), on
  which the comparison crashed before any figure was printed.
- bros_token_classifier: BROS's token classifier and its loss on a form: 16 words with their
  quadrilateral boxes (8 coordinates) under a padding mask: the pairwise relative box
  positions (every token with every token) through sinusoids and a projection, added to the
  attention scores per head (einsum), two BERT layers, the head, the cross-entropy (-100
  ignored).
- x_clip_video_text: X-CLIP's video-text contrastive loss on 2 videos of 4 frames of 16x16
  and 2 captions of 8 tokens (the second 3 shorter): per-frame ViT with cross-frame
  communication (message tokens attending across frames), the multi-frame integration
  transformer, the causal text transformer (its end-of-text token taken by argmax), the
  video-specific prompt generator (cross-attention of the text to the frames' tokens), the
  normalised projections, the logit scale, the symmetric cross-entropy.
- clap_audio_classifier: CLAP's audio encoder (HTSAT) and projection on 32 frames of 16 mel
  bins: BatchNorm over mel bins, the spectrogram stretched (bicubic) and folded into a 32x32
  image, conv patch embeddings, two Swin stages of one block (window attention with a
  relative position bias, patch merging), the LayerNorm, average pooling, the projection
  MLP.

NOT_COMPILED, replaced before any figure of theirs was seen. Eager runs them and Dynamo
captures each in one graph. The first, before any comparison was run: our compiler crashed on
it while the suite was written, checking its compiled code against eager:

- rf_detr_detector: RF-DETR's detector on a 32x32 image: a windowed DINOv2 backbone (2x2
  windows in one layer, global attention in the other), the C2f projector (convs with
  LayerNorm, SiLU), two-stage query selection (encoder proposals, top-k), a decoder layer
  with multi-scale deformable cross-attention (grid_sample), class and box heads.
  `AttributeError: 'NoneType' object has no attribute 'args'` in mtia_lab/compiler/ir.py's
  `_cat_args` (fx_node.args of a cat's fx node that is None), from `cat_kept` <- lowering.py's
  `_cat_pieces` <- `_multi_consumer_piece` <- `pointwise_cat` <- `unrolled_into` <-
  rules.py's `inlined_while_lowering` <- `can_fuse` <- scheduler.py's `fuse_nodes_once`, while
  compare/fidelity.py's `_ours_against_eager` scheduled the graph's IR with the departures
  off (`schedule(compiled.plan.ir, name)`; the compile with them on had run). Repro:

      eager_rows({"rf_detr_detector": _rf_detr_detector()})

The second, after the first run of the comparison (on the list as first committed, 90c30d7)
crashed on it before any figure was printed; Inductor's own code for the device cannot run:

- moonshine_streaming_encoder: Moonshine-Streaming's speech encoder on a raw waveform (32
  frames of 5 ms at 16 kHz, the second 640 samples shorter): per-frame mean and variance
  normalisation, a learned asinh compression, a frame projection with SiLU, two strided
  causal convs (the padding mask carried through their strides), two layers under
  sliding-window bidirectional masks (4 back, 1 or 0 ahead) with the padding, the final norm.
  `InductorDeviceError: Inductor's kernel calls libdevice.asinh, which Triton's interpreter
  cannot run on mtia_sim` (the asinh compression, fused with the normalisation into
  triton_per_fused_add_asinh_div_exp_mean_mul_pow_sqrt_sub_view_0), raised in
  mtia_lab/inductor/triton_launch.py's `run` while `device_plan` (mtia_lab/compare/plans.py)
  ran Inductor's compiled graph, from `fidelity_rows`. Repro:

      fidelity_rows({"moonshine_streaming_encoder": _moonshine_streaming_encoder()})

Both failures were fixed after the suite was measured: the recomputed cat in aaab367 (RF-DETR
is now checked against eager in tests/test_compiler_models.py), libdevice.asinh with every
other device-library function in d409c25. The two graphs stay out of the suite, which was
measured without them.

Dropped before the list was committed (before any comparison on them): eomt_dinov3_segmenter,
whose model builds its Hungarian-matching loss, which needs scipy (not installed), in
__init__; and pe_audio_encoder (the replacement first tried for moonshine_streaming_encoder),
whose embedder enters torch.backends.cudnn.flags, which breaks Dynamo's graph.

Measured blind at 727/781 (93%; 93.1% unrounded) on the tree it was written against (1df4d87):
Inductor's launches identical to one of ours with our departures off, 13 differing by a
departure that stays on, 6 by a part of Inductor not modelled, 35 unexplained (xglm 13, lasr 7,
aimv2 4, videomae 3, seggpt 3, bark 2, cwm 1, mlcd 1, clap 1); no graph misaligned. The suite
compared in 2 min 38 s on the shared machine.

After the round that did not look at it (2026-11-29: reorder_for_locality, dead nodes, a cat of
one dense piece removed as a no-op copy, int64 casts of a summed bool, peak_memory in elements,
a like-factory no reader), on 0a3c8b9: 739/781 (95%; 94.6% unrounded), 23 unexplained, no
graph misaligned; xglm 84 -> 93, videomae 101 -> 104. Tuned on in the next round: 749/781
(96%) on b594c81, its floor 0.95.

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


def _ministral3_layer_bf16():
    from transformers import Ministral3Config
    from transformers.models.ministral3.modeling_ministral3 import (
        Ministral3DecoderLayer,
        Ministral3RotaryEmbedding,
    )

    cfg = Ministral3Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                           head_dim=8, intermediate_size=64, num_hidden_layers=1, vocab_size=64,
                           max_position_embeddings=32,
                           rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0,
                                            "factor": 8.0, "original_max_position_embeddings": 4,
                                            "beta_fast": 32.0, "beta_slow": 1.0,
                                            "mscale_all_dim": 1.0, "mscale": 1.0,
                                            "llama_4_scaling_beta": 0.1},
                           attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_seeded_norms(_normal_init(Ministral3DecoderLayer(cfg, 0)), 1.0))
    layer = layer.to(torch.bfloat16)
    rope = _eval(Ministral3RotaryEmbedding(cfg))

    def ministral3(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, attention_mask=mask, position_ids=position_ids,
                            position_embeddings=rope(x, position_ids)))

    return ministral3, lambda: (_r(2, 8, 32, dtype=torch.bfloat16), _positions(2, 8))


def _jais2_layer():
    from transformers import Jais2Config
    from transformers.models.jais2.modeling_jais2 import Jais2DecoderLayer, Jais2RotaryEmbedding

    cfg = Jais2Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=4,
                      intermediate_size=64, num_hidden_layers=1, vocab_size=64,
                      max_position_embeddings=16, attn_implementation="eager",
                      **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_normal_init(Jais2DecoderLayer(cfg, 0)))
    rope = _eval(Jais2RotaryEmbedding(cfg))

    def jais2(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, attention_mask=mask, position_ids=position_ids,
                            position_embeddings=rope(x, position_ids)))

    return jais2, lambda: (_r(2, 8, 32), _positions(2, 8))


def _granite_swa_layer():
    from transformers import GraniteSWAConfig
    from transformers.models.granite_swa.modeling_granite_swa import (
        GraniteSWADecoderLayer,
        GraniteSWARotaryEmbedding,
    )

    cfg = GraniteSWAConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                           intermediate_size=64, num_hidden_layers=2, vocab_size=64,
                           max_position_embeddings=32, sliding_window=4,
                           layer_types=["sliding_attention", "full_attention"],
                           attention_multiplier=0.25, residual_multiplier=0.5,
                           attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = GraniteSWADecoderLayer(cfg, 0)
    layer = _eval(_seeded_norms(_normal_init(layer), 1.0))
    rope = _eval(GraniteSWARotaryEmbedding(cfg))

    def granite_swa(x, position_ids):
        # the sliding-window mask (window 4) the mask utilities build for a local layer
        length = x.shape[1]
        rows = torch.arange(length, device=x.device)
        keep = (rows[None, :] <= rows[:, None]) & (rows[:, None] - rows[None, :] < 4)
        mask = torch.where(keep, 0.0, torch.finfo(x.dtype).min).to(x.dtype)[None, None]
        return _first(layer(x, attention_mask=mask, position_ids=position_ids,
                            position_embeddings=rope(x, position_ids)))

    return granite_swa, lambda: (_r(2, 12, 32), _positions(2, 12))


def _dots1_moe_block():
    from transformers import Dots1Config
    from transformers.models.dots1.modeling_dots1 import Dots1MoE

    cfg = Dots1Config(hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
                      n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
                      n_group=4, topk_group=2, norm_topk_prob=True, routed_scaling_factor=2.5,
                      num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                      vocab_size=64, experts_implementation="batched_mm", **_NO_SPECIAL_TOKENS)
    block = _normal_init(Dots1MoE(cfg))
    torch.nn.init.normal_(block.gate.e_score_correction_bias, std=0.2)  # zeros when fresh
    block = _eval(block)
    return (lambda x: block(x)), lambda: (_r(2, 8, 32),)


def _xglm_lm_train_step():
    from transformers import XGLMConfig
    from transformers.models.xglm.modeling_xglm import XGLMForCausalLM

    cfg = XGLMConfig(vocab_size=64, d_model=32, ffn_dim=64, num_layers=2, attention_heads=4,
                     max_position_embeddings=32, dropout=0.0, attention_dropout=0.0,
                     activation_dropout=0.0, layerdrop=0.0, pad_token_id=1,
                     attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(XGLMForCausalLM(cfg))
    step = _grad_of(model, lambda out: out.loss)

    def xglm(input_ids, padding, labels):
        return step(input_ids=input_ids, attention_mask=padding, labels=labels)

    def inputs():  # 16 tokens, the second 4 shorter (its padding ignored by the loss)
        padding = _padding_inputs(16, 4)
        ids = torch.randint(3, 64, (2, 16)).masked_fill(padding == 0, 1)
        return ids, padding, ids.masked_fill(padding == 0, -100)

    return xglm, inputs


def _videomae_classifier_train_step():
    from transformers import VideoMAEConfig
    from transformers.models.videomae.modeling_videomae import VideoMAEForVideoClassification

    cfg = VideoMAEConfig(image_size=16, patch_size=8, num_channels=3, num_frames=4,
                         tubelet_size=2, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, intermediate_size=64, num_labels=5,
                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                         use_mean_pooling=True, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(VideoMAEForVideoClassification(cfg))
    step = _grad_of(model, lambda out: out.loss)

    def videomae(video, labels):
        return step(pixel_values=video, labels=labels)

    return videomae, lambda: (_r(2, 4, 3, 16, 16), torch.tensor([3, 1]))


def _cwm_lm_sampling_step():
    from transformers import CwmConfig
    from transformers.generation.logits_process import (
        MinPLogitsWarper,
        RepetitionPenaltyLogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
    )
    from transformers.models.cwm.modeling_cwm import CwmForCausalLM

    cfg = CwmConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                    max_position_embeddings=64,
                    rope_parameters={"rope_type": "llama3", "rope_theta": 1000000.0,
                                     "factor": 4.0, "high_freq_factor": 4.0,
                                     "low_freq_factor": 1.0,
                                     "original_max_position_embeddings": 16},
                    bos_token_id=1, eos_token_id=2, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(CwmForCausalLM(cfg))
    processors = (RepetitionPenaltyLogitsProcessor(1.3), TemperatureLogitsWarper(0.8),
                  TopKLogitsWarper(20), MinPLogitsWarper(0.05))

    def cwm(input_ids):
        scores = model(input_ids=input_ids).logits[:, -1, :].float()
        for processor in processors:
            scores = processor(input_ids, scores)
        return scores.softmax(-1)

    return cwm, lambda: (torch.randint(0, 64, (2, 12)),)


def _aimv2_vision_pooled():
    from transformers import Aimv2VisionConfig
    from transformers.models.aimv2.modeling_aimv2 import Aimv2VisionModel

    cfg = Aimv2VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                            num_attention_heads=4, num_channels=3, image_size=32, patch_size=8,
                            use_head=True, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(_seeded_norms(Aimv2VisionModel(cfg), 1.0))
    return (lambda pixels: model(pixel_values=pixels).pooler_output), lambda: (
        _r(2, 3, 32, 32),)


def _mlcd_vision_model():
    from transformers import MLCDVisionConfig
    from transformers.models.mlcd.modeling_mlcd import MLCDVisionModel

    cfg = MLCDVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_groups=1, num_channels=3,
                           image_size=32, patch_size=8, attn_implementation="eager")
    torch.manual_seed(0)
    model = MLCDVisionModel(cfg)
    for name, p in model.named_parameters():  # fresh class token and positions: seeded
        if "embedding" in name and p.dim() == 1:
            torch.nn.init.normal_(p, std=0.2)
    model = _eval(model)
    return (lambda pixels: model(pixel_values=pixels).pooler_output), lambda: (
        _r(2, 3, 32, 32),)


def _rf_detr_detector():  # NOT_COMPILED (see the docstring), kept for the record
    from transformers import RfDetrConfig, RfDetrDinov2Config
    from transformers.models.rf_detr.modeling_rf_detr import RfDetrForObjectDetection

    backbone = RfDetrDinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  mlp_ratio=2, image_size=32, patch_size=8, num_windows=2,
                                  window_block_indices=[0], num_register_tokens=0,
                                  out_features=["stage1", "stage2"])
    cfg = RfDetrConfig(backbone_config=backbone, d_model=32, decoder_layers=1,
                       decoder_self_attention_heads=4, decoder_cross_attention_heads=4,
                       decoder_n_points=2, decoder_ffn_dim=64, num_queries=8, group_detr=1,
                       c2f_num_blocks=1, num_labels=4, dropout=0.0, intermediate_size=64)
    torch.manual_seed(0)
    model = RfDetrForObjectDetection(cfg)
    for name, p in model.named_parameters():  # fresh constants (LayerScale, the deformable
        # attention's offsets and weights, the box head's last layer): seeded
        if p.numel() > 1 and "norm" not in name and p.std() == 0:
            torch.nn.init.normal_(p, mean=p.mean().item(), std=0.2)
    model = _eval(model)

    def rf_detr(pixels):
        out = model(pixel_values=pixels)
        return out.logits, out.pred_boxes

    return rf_detr, lambda: (_r(2, 3, 32, 32),)


def _seggpt_in_context_segmentation():
    from transformers import SegGptConfig
    from transformers.models.seggpt.modeling_seggpt import SegGptForImageSegmentation

    cfg = SegGptConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_dim=64,
                       image_size=[32, 16], patch_size=8, pretrain_image_size=16,
                       decoder_hidden_size=16, merge_index=0,
                       intermediate_hidden_state_indices=[0, 1], drop_path_rate=0.0)
    torch.manual_seed(0)
    model = SegGptForImageSegmentation(cfg)
    for name, p in model.named_parameters():  # fresh tokens and positions: seeded
        if "token" in name or "position_embeddings" in name or "rel_pos" in name:
            torch.nn.init.normal_(p, std=0.2)
    model = _eval(model)

    def seggpt(pixels, prompt_pixels, prompt_masks):
        return model(pixel_values=pixels, prompt_pixel_values=prompt_pixels,
                     prompt_masks=prompt_masks).pred_masks

    def inputs():  # a 16x16 image, a prompt image and its mask (two classes painted)
        mask = (torch.rand(2, 1, 16, 16) > 0.5).float().expand(2, 3, 16, 16).contiguous()
        return _r(2, 3, 16, 16), _r(2, 3, 16, 16), mask

    return seggpt, inputs


def _lasr_ctc():
    from transformers import LasrCTCConfig, LasrEncoderConfig
    from transformers.models.lasr.modeling_lasr import LasrForCTC

    encoder = LasrEncoderConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=64, conv_kernel_size=5,
                                subsampling_conv_channels=16, num_mel_bins=16,
                                subsampling_conv_kernel_size=3, subsampling_conv_stride=2,
                                dropout=0.0, layerdrop=0.0, activation_dropout=0.0,
                                attention_dropout=0.0, max_position_embeddings=64)
    cfg = LasrCTCConfig(vocab_size=12, encoder_config=encoder.to_dict(), pad_token_id=0)
    torch.manual_seed(0)
    model = _eval(_with_bn_statistics(LasrForCTC(cfg), torch.nn.BatchNorm1d))

    def lasr(features, padding):
        return model(input_features=features, attention_mask=padding).logits

    return lasr, lambda: (_r(2, 32, 16), _padding_inputs(32, 8))


def _moonshine_streaming_encoder():  # NOT_COMPILED (see the docstring), kept for the record
    from transformers import MoonshineStreamingEncoderConfig
    from transformers.models.moonshine_streaming.modeling_moonshine_streaming import (
        MoonshineStreamingEncoder,
    )

    cfg = MoonshineStreamingEncoderConfig(hidden_size=32, intermediate_size=64,
                                          num_hidden_layers=2, num_attention_heads=4,
                                          num_key_value_heads=4,
                                          sliding_windows=[[4, 1], [4, 0]],
                                          attn_implementation="eager")
    torch.manual_seed(0)
    encoder = _eval(MoonshineStreamingEncoder(cfg))

    def moonshine(waveform, padding):
        return encoder(waveform, attention_mask=padding).last_hidden_state

    def inputs():  # 32 frames of 5 ms at 16 kHz, the second 640 samples shorter
        padding = _padding_inputs(2560, 640)
        return _r(2, 2560) * padding, padding

    return moonshine, inputs


def _bark_fine_acoustics():
    from transformers import BarkFineConfig
    from transformers.models.bark.modeling_bark import BarkFineModel

    cfg = BarkFineConfig(block_size=32, input_vocab_size=48, output_vocab_size=48, num_layers=2,
                         num_heads=4, hidden_size=32, n_codes_total=4, n_codes_given=1,
                         attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(BarkFineModel(cfg))

    def bark(codes):  # the third codebook's logits, given the first three
        return model(2, input_ids=codes).logits

    return bark, lambda: (torch.randint(0, 48, (2, 32, 4)),)


def _bros_token_classifier():
    from transformers import BrosConfig
    from transformers.models.bros.modeling_bros import BrosForTokenClassification

    cfg = BrosConfig(vocab_size=64, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=32, dim_bbox=8,
                     num_labels=5, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     pad_token_id=0)
    torch.manual_seed(0)
    model = _eval(BrosForTokenClassification(cfg))

    def bros(input_ids, boxes, padding, labels):
        out = model(input_ids=input_ids, bbox=boxes, attention_mask=padding, labels=labels)
        return out.loss, out.logits

    def inputs():  # 16 words, their quadrilateral boxes (normalised), the second 4 shorter
        padding = _padding_inputs(16, 4)
        corners = torch.rand(2, 16, 2) * 0.8
        sizes = torch.rand(2, 16, 2) * 0.2
        x0, y0 = corners.unbind(-1)
        x1, y1 = (corners + sizes).unbind(-1)
        boxes = torch.stack([x0, y0, x1, y0, x1, y1, x0, y1], -1)
        labels = torch.randint(0, 5, (2, 16)).masked_fill(padding == 0, -100)
        ids = torch.randint(2, 64, (2, 16)).masked_fill(padding == 0, 0)
        return ids, boxes * padding[..., None], padding, labels

    return bros, inputs


def _x_clip_video_text():
    from transformers import XCLIPConfig
    from transformers.models.x_clip.modeling_x_clip import XCLIPModel

    cfg = XCLIPConfig(
        text_config={"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 1, "num_attention_heads": 4,
                     "max_position_embeddings": 16},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                       "num_attention_heads": 4, "image_size": 16, "patch_size": 8,
                       "num_frames": 4, "mit_hidden_size": 32, "mit_intermediate_size": 64,
                       "mit_num_hidden_layers": 1, "mit_num_attention_heads": 4},
        projection_dim=32, prompt_layers=1, prompt_attention_heads=4,
        prompt_projection_dropout=0.0, prompt_alpha=0.1, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(XCLIPModel(cfg))

    def x_clip(input_ids, padding, video):
        return model(input_ids=input_ids, attention_mask=padding, pixel_values=video,
                     return_loss=True).loss

    def inputs():  # two captions of 8 tokens (the second 3 shorter), two videos of 4 frames
        return torch.randint(1, 64, (2, 8)), _padding_inputs(8, 3), _r(2, 4, 3, 16, 16)

    return x_clip, inputs


def _clap_audio_classifier():
    from transformers import ClapAudioConfig
    from transformers.models.clap.modeling_clap import ClapAudioModelWithProjection

    cfg = ClapAudioConfig(window_size=4, num_mel_bins=16, spec_size=32, patch_size=4,
                          patch_stride=(4, 4), num_classes=5, hidden_size=32,
                          projection_dim=16, depths=[1, 1], num_attention_heads=[2, 4],
                          enable_fusion=False, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0, drop_path_rate=0.0,
                          patch_embeds_hidden_size=16, projection_hidden_act="relu",
                          mlp_ratio=2.0)
    torch.manual_seed(0)
    model = _eval(_with_bn_statistics(ClapAudioModelWithProjection(cfg)))
    return (lambda features: model(input_features=features).audio_embeds), lambda: (
        _r(2, 1, 32, 16),)


_BUILDERS = {
    "ministral3_layer_bf16": _ministral3_layer_bf16,
    "jais2_layer": _jais2_layer,
    "granite_swa_layer": _granite_swa_layer,
    "dots1_moe_block": _dots1_moe_block,
    "xglm_lm_train_step": _xglm_lm_train_step,
    "videomae_classifier_train_step": _videomae_classifier_train_step,
    "cwm_lm_sampling_step": _cwm_lm_sampling_step,
    "aimv2_vision_pooled": _aimv2_vision_pooled,
    "mlcd_vision_model": _mlcd_vision_model,
    "seggpt_in_context_segmentation": _seggpt_in_context_segmentation,
    "lasr_ctc": _lasr_ctc,
    "bark_fine_acoustics": _bark_fine_acoustics,
    "bros_token_classifier": _bros_token_classifier,
    "x_clip_video_text": _x_clip_video_text,
    "clap_audio_classifier": _clap_audio_classifier,
}

# Graphs whose audit fails, kept in the suite (their launches counted in its figure): none yet.
NOT_ALIGNED: dict[str, str] = {}

# Graphs our compiler or the comparison failed on when the suite was written (see the module
# docstring), kept for the record: replaced before any figure of theirs was seen.
NOT_COMPILED = {"rf_detr_detector": (
    "our compiler crashed scheduling its IR with the departures off: AttributeError "
    "'NoneType' object has no attribute 'args' in mtia_lab/compiler/ir.py _cat_args (a cat's "
    "fx node is None) <- cat_kept <- lowering.py _cat_pieces <- _multi_consumer_piece <- "
    "pointwise_cat <- unrolled_into <- rules.py inlined_while_lowering <- can_fuse <- "
    "scheduler.py fuse_nodes_once, from compare/fidelity.py _ours_against_eager; no figure "
    "was printed"),
    "moonshine_streaming_encoder": (
    "Inductor's compiled graph cannot run on the device: its kernel for the frame "
    "normalisation and asinh compression calls libdevice.asinh, which Triton's interpreter "
    "cannot run on mtia_sim (InductorDeviceError in mtia_lab/inductor/triton_launch.py, from "
    "device_plan in mtia_lab/compare/plans.py <- fidelity_rows); no figure was printed")}


def heldout14_graphs() -> dict:
    """{name: (fn, make_inputs)}, modules built (with seeded weights) on first call."""
    torch.manual_seed(0)
    return {name: build() for name, build in _BUILDERS.items()}
