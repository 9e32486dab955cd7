"""The SEVENTEENTH HELD-OUT fidelity suite, written blind: its list of graphs was committed
before any comparison was run on it, by someone who was not tuning the scheduler, while others
tuned on the other suites, so that the figure it gives is that of graphs nobody tuned on.

Decoder layers (one in bfloat16 with per-layer inputs, one with gated attention and partial
multimodal rotary, one with a sliding window and learned attention sinks), an MoE block with a
sigmoid router and score-correction bias, a language model's sampling step, two training steps
(a masked language model and a causal language model), a convolutional backbone, a ViT
backbone with registers, a text detector, a speech recogniser's transcription step, an
image-text retrieval model, a document parser (an image encoder-decoder), a translation step (an
encoder-decoder) and a depth estimator prompted by a low-resolution depth map, built from the
module code of `transformers` with tiny configs and seeded random weights, from fifteen
families used in none of the other suites (fidelity_graphs, fidelity_tuning_hf,
fidelity_heldout .. fidelity_heldout16) nor in any other test (torchvision, timm and scipy are
not installed); Donut's decoder is MBart's, a family used nowhere else either. Some are new
members of a line an earlier suite took another member of, with modules of their own: Gemma 4
(Gemma .. Gemma 3: held-out, held-out-9 and others), Qwen3.5 (Qwen3-Next: held-out-8),
MiniMax-M2 (MiniMax's lightning attention: held-out-9), GLM-4.7-Flash's MoE-Lite (GLM-4-MoE:
held-out-10), XLM-RoBERTa (RoBERTa), ModernBERT's decoder (ModernBERT: held-out-5),
PP-LCNetV4 (PP-LCNet: held-out-8, PP-LCNetV3: held-out-13), PP-OCRv5's server text detector
(its mobile one: held-out-13; the HGNetV2 backbone: held-out-6), UMT5 (T5), Prompt Depth
Anything (Depth Anything: held-out-9), AltCLIP (CLIP, Chinese-CLIP: held-out-15) and TIPSv2.
Small shapes (batch 2, widths <= 64, sequences <= 32, images <= 32x32, one or two layers), so
that the whole suite compares in a few minutes. Chosen for what real workloads contain, before
anything was measured:

- gemma4_layer_bf16: Gemma 4's decoder layer (a sliding-window layer) in bfloat16: RMSNorms
  before and after each block, per-head query and key RMSNorms and a scale-free value RMSNorm,
  rotary, grouped-query attention under a causal mask, a GELU-tanh gated MLP, the per-layer
  input (a gate projection, GELU, times the layer's own embedding input, projected back,
  RMSNormed, added) and the layer scalar.
- qwen3_5_attention_layer: Qwen3.5's full-attention decoder layer: zero-centred RMSNorms
  (1 + weight), the query projection doubled into queries and a sigmoid output gate, per-head
  query and key RMSNorms, partial (a quarter of the head) multimodal rotary on text positions,
  grouped-query attention under a causal mask, SwiGLU.
- mimo_v2_flash_layer: MiMo-V2-Flash's decoder layer (its sliding-window layer): RMSNorms,
  grouped-query attention with query/key heads wider than the value heads, rotary, learned
  attention sinks, a sliding window of 4 in the mask, a dense SwiGLU.
- minimax_m2_moe_block: MiniMax-M2's sparse MoE block: a sigmoid router with a score-correction
  bias for the choice only, top-2 of 8 experts with normalised weights, "batched_mm" SwiGLU
  experts.
- xlm_roberta_mlm_train_step: XLM-RoBERTa's masked language model TRAINED one step: forward and
  backward (torch.func.grad of the cross-entropy on the masked tokens, -100 elsewhere, every
  weight's gradient) on 16 tokens under a padding mask: embeddings with padding-aware
  positions, a post-LayerNorm encoder layer (GELU), the LM head (dense, GELU, LayerNorm, the
  tied decoder).
- modernbert_decoder_lm_train_step: ModernBERT's decoder (a causal language model) TRAINED one
  step: forward and backward (torch.func.grad of the shifted cross-entropy, every weight's
  gradient) on 16 tokens: bias-free LayerNorms, a sliding-window layer and a global layer with
  their own rotary, GeGLU MLPs, the prediction head and the tied decoder.
- glm4_moe_lite_sampling_step: GLM-4.7-Flash's (MoE-Lite) causal LM (multi-head latent
  attention with interleaved rotary, a dense layer then an MoE layer of top-2 of 4 "batched_mm"
  experts with a sigmoid router, score-correction bias and a shared expert) and one step of
  sampling's logits processing: the last position's logits, suppressed tokens, temperature,
  typical sampling (entropy, sort, cumsum, scatter), top-p (sort, cumsum, scatter), the softmax.
- pp_lcnet_v4_backbone: PP-LCNetV4's convolutional backbone on a 32x32 image: the large stem
  (strided convs, a max-pooled branch concatenated), depthwise-separable blocks with squeeze-
  and-excitation (hardsigmoid gates), BatchNorm, ReLU and learnable affine blocks, asymmetric
  (2, 1) strides, three stages' feature maps.
- tipsv2_vision_backbone: TIPSv2's ViT backbone on a 32x32 image: conv patch embeddings, the
  class token and registers, learned positions, two pre-LayerNorm layers with layer scale and
  a SwiGLU FFN, the final LayerNorm, the pooled class token.
- pp_ocrv5_server_text_detector: PP-OCRv5's server text detector on a 32x32 image: an HGNetV2
  backbone (stem, stages of conv blocks, light blocks), the large-kernel PAN neck (top-down and
  bottom-up paths, nearest upsampling, intra-class blocks of square, vertical and horizontal
  convs summed), the progressive head: the DB probability map (conv, BatchNorm, ReLU,
  transposed convs, sigmoid) refined by the local module (the map concatenated with upsampled
  features, convs, sigmoid) and averaged with it.
- glmasr_transcription_step: GLM-ASR's speech recogniser, one decoding step on 64 frames of 16
  mel bins: the audio encoder (two convs with GELU, the second strided, rotary attention
  layers), frames merged by 4 and projected (GELU MLP), the 8 audio embeddings scattered into
  the prompt's placeholder tokens (masked_scatter), the Llama decoder layer on the 14-token
  prompt, the LM head.
- altclip_image_text_retrieval: AltCLIP's image-text retrieval and its contrastive loss on two
  32x32 images and two captions of 12 tokens (the second 3 shorter): the XLM-R text encoder
  (padding-aware positions, post-LayerNorm layers) under the padding mask, its tokens projected
  and the first taken, the CLIP vision transformer (pre-LayerNorm, quick GELU), the class token's
  projection, the normalised embeddings, the logit scale, the symmetric cross-entropy. It
  replaces kosmos2_grounded_captioning_step (below), on which the comparison crashed before
  any figure was printed.
- donut_document_parsing_step: Donut's document parser, one decoding step on a 32x32 page:
  the Swin encoder (conv patches, windowed attention with relative position bias, patch
  merging) and an MBart decoder layer (scaled embeddings, learned positions,
  causal self-attention, cross-attention on the page's features, the LayerNorms) on an 8-token
  prompt, the LM head, through VisionEncoderDecoderModel.
- umt5_translation_step: UMT5's translation step: a 16-token source under a padding mask (the
  second 5 shorter), an encoder layer and a decoder layer each with their own relative position
  buckets (unshared, per layer), RMSNorms, gated-GELU feed-forwards, cross-attention, the LM
  head on 8 target tokens.
- prompt_depth_anything_estimator: Prompt Depth Anything's metric depth on a 28x28 image
  prompted by a 7x7 low-resolution depth map: the DINOv2 backbone (4 layers' features), the
  reassemble stage (projections, transposed-conv and strided-conv resampling), the fusion
  stage with the prompt depth resized (bilinear) and convolved into each fusion layer,
  the depth head (upsampling, convs, ReLU, sigmoid times the maximum depth).

NOT_COMPILED, replaced before any figure of it was seen. Eager runs it and Dynamo captures it
in one graph; the first run of the comparison (on the list as first committed, 26b966c)
crashed on it before any figure was printed, in Inductor's compile for the device:

- kosmos2_grounded_captioning_step: Kosmos-2's grounded captioning step on a 32x32 image and a
  15-token prompt: the CLIP-style vision encoder, the image-to-text projection (latent queries
  attending to the patches), the image embeddings placed at the prompt's image positions,
  the sinusoidal-position text decoder layer (sub-LayerNorm FFN), the LM head.
  `RuntimeError: shape mismatch: value tensor of shape [8, 32] cannot be broadcast to
  indexing result of shape [0, 32]` at Inductor's wrapper's `aten.index_put_(buf56, [buf57],
  buf55, False)` (the model's `inputs_embeds[img_input_mask.to(torch.bool)] = image_embeds
  .view(-1, ...)`, a boolean index), while `device_plan` (mtia_lab/compare/plans.py) ran
  Inductor's compiled graph, from `fidelity_rows`. `device_plan` runs it on inputs of its own
  (`_inputs`: random floats, integer inputs ZEROS), so the image-position mask selects no
  token for the 8 image embeddings; the entry's own inputs select 8 (eager and our compiled
  code run). A limit of the comparison's inputs for graphs whose integer inputs are indices or
  masks, not fixed here. Repro:

      fidelity_rows({"kosmos2_grounded_captioning_step": _kosmos2_grounded_captioning_step()})

Changed before the list was committed (before any comparison on them), because Dynamo breaks
their graph or the module cannot be built here: glmasr_transcription_step through the model's
forward (get_audio_features selects the valid frames with a boolean mask, a data-dependent
shape: 6 graphs), so the entry calls the same modules and keeps the placeholder scatter, all
frames valid. Set aside on reading, never written: InternLM3 and IQuestCoder (modular files
only, no modeling file to build from), PP-LCNetV3 (the backbone of held-out-13's detector,
under its config name only).

Measured blind at 1071/1101 (97%; 97.3% unrounded) on the tree it was written against
(05e5946): Inductor's launches identical to one of ours with our departures off, 8 differing
by a departure that stays on, 4 by a part of Inductor not modelled, 18 unexplained (qwen3_5 5,
modernbert_decoder 4, glmasr 3, altclip 2, xlm_roberta 1, pp_ocrv5_server 1, donut 1,
prompt_depth_anything 1); no graph misaligned, every graph's compiled code gives eager's
results (the blind test's audit and eager checks pass). With our departures on, 619/1101. The
suite compared in 5 min 36 s (6 min 32 s with the summary; 2 min 44 s and 3 min 11 s of CPU)
on the shared machine, loaded about 6.5 to 7 on its 2 cores by the tuners. Not tuned on; no
floor yet.

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


def _gemma4_layer_bf16():
    from transformers import Gemma4TextConfig
    from transformers.models.gemma4.modeling_gemma4 import (
        Gemma4TextDecoderLayer,
        Gemma4TextRotaryEmbedding,
    )

    cfg = Gemma4TextConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           head_dim=8, global_head_dim=16, max_position_embeddings=32,
                           sliding_window=8,
                           layer_types=["sliding_attention", "full_attention"],
                           vocab_size_per_layer_input=64, hidden_size_per_layer_input=8,
                           attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_seeded_norms(_normal_init(Gemma4TextDecoderLayer(cfg, 0)), 1.0))
    layer = layer.to(torch.bfloat16)
    rope = _eval(Gemma4TextRotaryEmbedding(cfg))

    def gemma4(x, per_layer_input, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return layer(x, per_layer_input=per_layer_input, shared_kv_states={},
                     position_embeddings=rope(x, position_ids, "sliding_attention"),
                     attention_mask=mask, position_ids=position_ids)

    return gemma4, lambda: (_r(2, 8, 32, dtype=torch.bfloat16), _r(2, 8, 8, dtype=torch.bfloat16),
                            _positions(2, 8))


def _qwen3_5_attention_layer():
    from transformers import Qwen3_5TextConfig
    from transformers.models.qwen3_5.modeling_qwen3_5 import (
        Qwen3_5DecoderLayer,
        Qwen3_5TextRotaryEmbedding,
    )

    cfg = Qwen3_5TextConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                            head_dim=16, max_position_embeddings=32,
                            layer_types=["linear_attention", "full_attention"],
                            attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_seeded_norms(_normal_init(Qwen3_5DecoderLayer(cfg, 1)), 0.0))
    rope = _eval(Qwen3_5TextRotaryEmbedding(cfg))

    def qwen3_5(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, position_embeddings=rope(x, position_ids), attention_mask=mask,
                            position_ids=position_ids))

    return qwen3_5, lambda: (_r(2, 8, 32), _positions(2, 8))


def _mimo_v2_flash_layer():
    from transformers import MiMoV2FlashConfig
    from transformers.models.mimo_v2_flash.modeling_mimo_v2_flash import (
        MiMoV2FlashDecoderLayer,
        MiMoV2FlashRotaryEmbedding,
    )

    cfg = MiMoV2FlashConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                            head_dim=12, v_head_dim=8, moe_intermediate_size=16,
                            n_routed_experts=4, num_experts_per_tok=2, sliding_window=4,
                            layer_types=["sliding_attention", "full_attention"],
                            mlp_layer_types=["dense", "sparse"], max_position_embeddings=32,
                            attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_seeded_norms(_normal_init(MiMoV2FlashDecoderLayer(cfg, 0)), 1.0))
    rope = _eval(MiMoV2FlashRotaryEmbedding(cfg))

    def mimo_v2_flash(x, position_ids):
        length = x.shape[1]
        rows = torch.arange(length, device=x.device)
        window = (rows[:, None] - rows[None, :]) < cfg.sliding_window
        mask = _causal_mask(length, x.dtype, x.device).masked_fill(
            ~window, torch.finfo(x.dtype).min)
        return _first(layer(x, attention_mask=mask, position_ids=position_ids,
                            position_embeddings=rope(x, position_ids, "sliding_attention")))

    return mimo_v2_flash, lambda: (_r(2, 8, 32), _positions(2, 8))


def _minimax_m2_moe_block():
    from transformers import MiniMaxM2Config
    from transformers.models.minimax_m2.modeling_minimax_m2 import MiniMaxM2SparseMoeBlock

    cfg = MiniMaxM2Config(hidden_size=32, intermediate_size=16, num_hidden_layers=1,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                          num_local_experts=8, num_experts_per_tok=2, vocab_size=64,
                          experts_implementation="batched_mm", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    block = _normal_init(MiniMaxM2SparseMoeBlock(cfg))
    block.e_score_correction_bias.normal_(std=0.2)  # zeros when fresh
    block = _eval(block)
    return (lambda x: block(x)), lambda: (_r(2, 8, 32),)


def _xlm_roberta_mlm_train_step():
    from transformers import XLMRobertaConfig
    from transformers.models.xlm_roberta.modeling_xlm_roberta import XLMRobertaForMaskedLM

    cfg = XLMRobertaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1,
                           num_attention_heads=4, intermediate_size=64,
                           max_position_embeddings=40, hidden_dropout_prob=0.0,
                           attention_probs_dropout_prob=0.0, pad_token_id=1, bos_token_id=0,
                           eos_token_id=2, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(XLMRobertaForMaskedLM(cfg))
    step = _grad_of(model, lambda out: out.loss)

    def xlm_roberta(input_ids, padding, labels):
        return step(input_ids=input_ids, attention_mask=padding, labels=labels)

    def inputs():  # 16 tokens (the second 4 padding), 15% masked (token 3), the rest -100
        padding = _padding_inputs(16, 4)
        ids = torch.randint(4, 64, (2, 16))
        masked = (torch.rand(2, 16) < 0.15) & (padding == 1)
        masked[:, 1] = True
        labels = ids.masked_fill(~masked, -100)
        ids = ids.masked_fill(masked, 3).masked_fill(padding == 0, 1)
        return ids, padding, labels

    return xlm_roberta, inputs


def _modernbert_decoder_lm_train_step():
    from transformers import ModernBertDecoderConfig
    from transformers.models.modernbert_decoder.modeling_modernbert_decoder import (
        ModernBertDecoderForCausalLM,
    )

    cfg = ModernBertDecoderConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                  num_hidden_layers=2, num_attention_heads=4,
                                  max_position_embeddings=32, local_attention=8,
                                  layer_types=["sliding_attention", "full_attention"],
                                  pad_token_id=0, eos_token_id=1, bos_token_id=2,
                                  cls_token_id=2, sep_token_id=1, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(ModernBertDecoderForCausalLM(cfg))
    step = _grad_of(model, lambda out: out.loss)

    def modernbert_decoder(input_ids, labels):
        return step(input_ids=input_ids, labels=labels)

    def inputs():  # 16 tokens, the labels the inputs (shifted inside the loss)
        ids = torch.randint(3, 64, (2, 16))
        return ids, ids.clone()

    return modernbert_decoder, inputs


def _glm4_moe_lite_sampling_step():
    from transformers import Glm4MoeLiteConfig
    from transformers.generation.logits_process import (
        SuppressTokensLogitsProcessor,
        TemperatureLogitsWarper,
        TopPLogitsWarper,
        TypicalLogitsWarper,
    )
    from transformers.models.glm4_moe_lite.modeling_glm4_moe_lite import Glm4MoeLiteForCausalLM

    cfg = Glm4MoeLiteConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                            moe_intermediate_size=16, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1,
                            n_routed_experts=4, num_experts_per_tok=2, kv_lora_rank=16,
                            q_lora_rank=24, qk_rope_head_dim=8, v_head_dim=8,
                            qk_nope_head_dim=8, max_position_embeddings=32,
                            mlp_layer_types=["dense", "sparse"],
                            experts_implementation="batched_mm", attn_implementation="eager",
                            **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    model = _normal_init(Glm4MoeLiteForCausalLM(cfg))
    for name, b in model.named_buffers():  # the routers' score-correction bias: zeros when fresh
        if name.endswith("e_score_correction_bias"):
            torch.nn.init.normal_(b, std=0.2)
    model = _eval(_seeded_norms(model, 1.0))
    processors = (SuppressTokensLogitsProcessor([0, 1], device="mtia_sim"),
                  TemperatureLogitsWarper(0.7), TypicalLogitsWarper(0.9), TopPLogitsWarper(0.9))

    def glm4_moe_lite(input_ids):
        scores = model(input_ids=input_ids).logits[:, -1, :].float()
        for processor in processors:
            scores = processor(input_ids, scores)
        return scores.softmax(-1)

    return glm4_moe_lite, lambda: (torch.randint(2, 64, (2, 12)),)


def _pp_lcnet_v4_backbone():
    from transformers import PPLCNetV4Config
    from transformers.models.pp_lcnet_v4.modeling_pp_lcnet_v4 import PPLCNetV4Backbone

    cfg = PPLCNetV4Config(stem_channels=[3, 8, 16],
                          block_configs=[[[3, 16, 16, 1, True]],
                                         [[3, 16, 16, 1, False], [3, 16, 16, 1, False]],
                                         [[3, 16, 32, [2, 1], False], [5, 32, 32, 1, True]],
                                         [[5, 32, 64, [2, 1], False], [5, 64, 64, 1, True]]],
                          use_learnable_affine_block=True,
                          out_features=["stage2", "stage3", "stage4"])
    torch.manual_seed(0)
    model = _eval(_with_bn_statistics(PPLCNetV4Backbone(cfg)))
    return (lambda pixels: tuple(model(pixel_values=pixels).feature_maps)), lambda: (
        _r(2, 3, 32, 32),)


def _tipsv2_vision_backbone():
    from transformers import Tipsv2VisionConfig
    from transformers.models.tipsv2.modeling_tipsv2 import Tipsv2VisionModel

    cfg = Tipsv2VisionConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                             mlp_ratio=2, image_size=32, patch_size=8, layerscale_value=0.5,
                             use_swiglu_ffn=True, num_register_tokens=2,
                             attn_implementation="eager")
    torch.manual_seed(0)
    model = Tipsv2VisionModel(cfg)
    for name, p in model.named_parameters():  # fresh positions and tokens (zeros): seeded
        if "position_embeddings" in name or "token" in name:
            torch.nn.init.normal_(p, std=0.2)
    model = _eval(model)

    def tipsv2(pixels):
        out = model(pixel_values=pixels)
        return out.last_hidden_state, out.pooler_output

    return tipsv2, lambda: (torch.rand(2, 3, 32, 32),)


def _pp_ocrv5_server_text_detector():
    from transformers import HGNetV2Config, PPOCRV5ServerDetConfig
    from transformers.models.pp_ocrv5_server_det.modeling_pp_ocrv5_server_det import (
        PPOCRV5ServerDetForObjectDetection,
    )

    backbone = HGNetV2Config(embedding_size=8, depths=[1, 1, 1, 1],
                             hidden_sizes=[16, 32, 48, 64], stem_channels=[3, 8, 8],
                             stage_in_channels=[8, 16, 32, 48],
                             stage_mid_channels=[8, 8, 16, 16],
                             stage_out_channels=[16, 32, 48, 64],
                             stage_num_blocks=[1, 1, 1, 1],
                             stage_downsample=[False, True, True, True],
                             stage_light_block=[False, False, True, True],
                             stage_kernel_size=[3, 3, 5, 5], stage_numb_of_layers=[1, 1, 1, 1],
                             out_features=["stage1", "stage2", "stage3", "stage4"])
    intraclass = {"reduce_channel": [1, 1, 0], "return_channel": [1, 1, 0],  # (k, stride, pad)
                  "vertical_long_to_small_conv_longratio": [[7, 1], 1, [3, 0]],
                  "vertical_long_to_small_conv_midratio": [[5, 1], 1, [2, 0]],
                  "vertical_long_to_small_conv_shortratio": [[3, 1], 1, [1, 0]],
                  "horizontal_small_to_long_conv_longratio": [[1, 7], 1, [0, 3]],
                  "horizontal_small_to_long_conv_midratio": [[1, 5], 1, [0, 2]],
                  "horizontal_small_to_long_conv_shortratio": [[1, 3], 1, [0, 1]],
                  "symmetric_conv_long_longratio": [7, 1, 3],
                  "symmetric_conv_long_midratio": [5, 1, 2],
                  "symmetric_conv_long_shortratio": [3, 1, 1]}
    cfg = PPOCRV5ServerDetConfig(backbone_config=backbone, neck_out_channels=32,
                                 intraclass_block_number=4, intraclass_block_config=intraclass,
                                 scale_factor_list=[1, 2, 4, 8], kernel_list=[3, 2, 2])
    torch.manual_seed(0)
    model = _eval(_with_bn_statistics(PPOCRV5ServerDetForObjectDetection(cfg)))
    return (lambda pixels: _first(model(pixel_values=pixels))), lambda: (_r(2, 3, 32, 32),)


def _glmasr_transcription_step():
    from transformers import GlmAsrConfig
    from transformers.models.glmasr.modeling_glmasr import GlmAsrForConditionalGeneration

    cfg = GlmAsrConfig(
        audio_config={"hidden_size": 16, "intermediate_size": 64, "num_hidden_layers": 1,
                      "num_attention_heads": 4, "num_mel_bins": 16,
                      "max_position_embeddings": 64},
        text_config={"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
                     "max_position_embeddings": 64, "eos_token_id": 2, "bos_token_id": 1,
                     "pad_token_id": 0},
        audio_token_id=63, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(_seeded_norms(GlmAsrForConditionalGeneration(cfg), 1.0))

    def glmasr(features, input_ids):
        # the audio tower and projector (get_audio_features without its boolean-mask select,
        # a data-dependent shape: every frame is valid here), the audio embeddings scattered
        # into the prompt's placeholder tokens as the model does, then the language model
        audio = model.model.audio_tower(features).last_hidden_state
        audio = model.model.multi_modal_projector(
            audio.reshape(features.shape[0], -1, cfg.audio_config.intermediate_size))
        embeds = model.get_input_embeddings()(input_ids)
        placeholders = (input_ids == cfg.audio_token_id)[..., None].expand_as(embeds)
        embeds = embeds.masked_scatter(placeholders, audio.to(embeds.dtype))
        return model(inputs_embeds=embeds).logits

    def inputs():  # 64 frames of 16 mel bins (8 audio tokens), in a 14-token prompt
        ids = torch.randint(3, 60, (2, 14))
        ids[:, 3:11] = 63
        return _r(2, 16, 64), ids

    return glmasr, inputs


def _kosmos2_grounded_captioning_step():  # NOT_COMPILED (see the docstring), kept for the record
    from transformers import Kosmos2Config
    from transformers.models.kosmos2.modeling_kosmos2 import Kosmos2ForConditionalGeneration

    cfg = Kosmos2Config(
        text_config={"vocab_size": 64, "max_position_embeddings": 32, "embed_dim": 32,
                     "layers": 1, "ffn_dim": 64, "attention_heads": 4, "dropout": 0.0,
                     "attention_dropout": 0.0},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                       "num_attention_heads": 4, "image_size": 32, "patch_size": 8},
        latent_query_num=4, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(Kosmos2ForConditionalGeneration(cfg))

    def kosmos2(pixels, input_ids, image_positions, padding):
        return model(pixel_values=pixels, input_ids=input_ids,
                     image_embeds_position_mask=image_positions, attention_mask=padding).logits

    def inputs():  # <image> 4 latent slots </image> then a 9-token grounded prompt
        ids = torch.randint(4, 64, (2, 15))
        ids[:, 0] = 0
        positions = torch.zeros(2, 15, dtype=torch.long)
        positions[:, 2:6] = 1
        return _r(2, 3, 32, 32), ids, positions, torch.ones(2, 15, dtype=torch.long)

    return kosmos2, inputs


def _altclip_image_text_retrieval():
    from transformers import AltCLIPConfig
    from transformers.models.altclip.modeling_altclip import AltCLIPModel

    cfg = AltCLIPConfig(
        text_config={"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 4,
                     "max_position_embeddings": 40, "hidden_dropout_prob": 0.0,
                     "project_dim": 32},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "projection_dim": 32,
                       "num_hidden_layers": 2, "num_attention_heads": 4, "image_size": 32,
                       "patch_size": 8},
        projection_dim=32, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(AltCLIPModel(cfg))

    def altclip(input_ids, padding, pixels):
        out = model(input_ids=input_ids, attention_mask=padding, pixel_values=pixels,
                    return_loss=True)
        return out.loss, out.logits_per_image

    def inputs():  # two captions of 12 tokens (the second 3 shorter), two 32x32 images
        padding = _padding_inputs(12, 3)
        ids = torch.randint(3, 64, (2, 12)).masked_fill(padding == 0, 1)
        ids[:, 0] = 0
        return ids, padding, _r(2, 3, 32, 32)

    return altclip, inputs


def _donut_document_parsing_step():
    from transformers import (
        DonutSwinConfig,
        MBartConfig,
        VisionEncoderDecoderConfig,
        VisionEncoderDecoderModel,
    )

    encoder = DonutSwinConfig(image_size=[32, 32], patch_size=4, embed_dim=16, depths=[1, 1],
                              num_heads=[2, 4], window_size=4, mlp_ratio=2.0,
                              drop_path_rate=0.0)
    decoder = MBartConfig(vocab_size=64, d_model=32, decoder_layers=1, decoder_ffn_dim=64,
                          decoder_attention_heads=4, max_position_embeddings=32, dropout=0.0,
                          attention_dropout=0.0, activation_dropout=0.0, scale_embedding=True,
                          add_cross_attention=True, is_decoder=True, pad_token_id=1,
                          bos_token_id=0, eos_token_id=2, decoder_start_token_id=0,
                          attn_implementation="eager")
    cfg = VisionEncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    torch.manual_seed(0)
    model = _eval(VisionEncoderDecoderModel(config=cfg))

    def donut(pixels, decoder_ids):
        return model(pixel_values=pixels, decoder_input_ids=decoder_ids).logits

    # a 32x32 page, the task prompt and 7 tokens parsed so far
    return donut, lambda: (_r(2, 3, 32, 32), torch.randint(3, 64, (2, 8)))


def _umt5_translation_step():
    from transformers import UMT5Config
    from transformers.models.umt5.modeling_umt5 import UMT5ForConditionalGeneration

    cfg = UMT5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=1,
                     num_decoder_layers=1, num_heads=4, relative_attention_num_buckets=8,
                     relative_attention_max_distance=16, dropout_rate=0.0,
                     initializer_factor=1.0, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(_normal_init(UMT5ForConditionalGeneration(cfg)))

    def umt5(input_ids, padding, decoder_ids):
        return model(input_ids=input_ids, attention_mask=padding,
                     decoder_input_ids=decoder_ids).logits

    def inputs():  # a 16-token source (the second 5 shorter), 8 target tokens so far
        padding = _padding_inputs(16, 5)
        ids = torch.randint(2, 64, (2, 16)).masked_fill(padding == 0, 0)
        return ids, padding, torch.randint(2, 64, (2, 8))

    return umt5, inputs


def _prompt_depth_anything_estimator():
    from transformers import Dinov2Config, PromptDepthAnythingConfig
    from transformers.models.prompt_depth_anything.modeling_prompt_depth_anything import (
        PromptDepthAnythingForDepthEstimation,
    )

    backbone = Dinov2Config(hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                            mlp_ratio=2, image_size=28, patch_size=14,
                            out_indices=[1, 2, 3, 4], reshape_hidden_states=False,
                            apply_layernorm=True)
    cfg = PromptDepthAnythingConfig(backbone_config=backbone, patch_size=14,
                                    reassemble_hidden_size=32, neck_hidden_sizes=[8, 16, 32, 32],
                                    fusion_hidden_size=16, head_hidden_size=8,
                                    depth_estimation_type="metric", max_depth=10)
    torch.manual_seed(0)
    model = _eval(PromptDepthAnythingForDepthEstimation(cfg))

    def prompt_depth_anything(pixels, prompt_depth):
        return model(pixel_values=pixels, prompt_depth=prompt_depth).predicted_depth

    # a 28x28 image and a 7x7 depth map from a low-resolution sensor (metres)
    return prompt_depth_anything, lambda: (_r(2, 3, 28, 28), torch.rand(2, 1, 7, 7) * 5)


_BUILDERS = {
    "gemma4_layer_bf16": _gemma4_layer_bf16,
    "qwen3_5_attention_layer": _qwen3_5_attention_layer,
    "mimo_v2_flash_layer": _mimo_v2_flash_layer,
    "minimax_m2_moe_block": _minimax_m2_moe_block,
    "xlm_roberta_mlm_train_step": _xlm_roberta_mlm_train_step,
    "modernbert_decoder_lm_train_step": _modernbert_decoder_lm_train_step,
    "glm4_moe_lite_sampling_step": _glm4_moe_lite_sampling_step,
    "pp_lcnet_v4_backbone": _pp_lcnet_v4_backbone,
    "tipsv2_vision_backbone": _tipsv2_vision_backbone,
    "pp_ocrv5_server_text_detector": _pp_ocrv5_server_text_detector,
    "glmasr_transcription_step": _glmasr_transcription_step,
    "altclip_image_text_retrieval": _altclip_image_text_retrieval,
    "donut_document_parsing_step": _donut_document_parsing_step,
    "umt5_translation_step": _umt5_translation_step,
    "prompt_depth_anything_estimator": _prompt_depth_anything_estimator,
}

# Graphs whose audit fails, kept in the suite (their launches counted in its figure): none yet.
NOT_ALIGNED: dict[str, str] = {}

# Graphs our compiler or the comparison failed on when the suite was written (see the module
# docstring), kept for the record: replaced before any figure of theirs was seen.
NOT_COMPILED: dict[str, str] = {"kosmos2_grounded_captioning_step": (
    "the comparison crashed in device_plan (mtia_lab/compare/plans.py) running Inductor's "
    "compiled graph: RuntimeError shape mismatch: value tensor of shape [8, 32] cannot be "
    "broadcast to indexing result of shape [0, 32] at aten.index_put_ with a boolean index "
    "(the image embeddings put at the image positions), device_plan's own inputs (_inputs: "
    "integer inputs zeros) selecting no position; no figure was printed")}


def heldout17_graphs() -> dict:
    """{name: (fn, make_inputs)}, modules built (with seeded weights) on first call."""
    torch.manual_seed(0)
    return {name: build() for name, build in _BUILDERS.items()}
