"""The SIXTEENTH HELD-OUT fidelity suite, written blind: its list of graphs was committed before
any comparison was run on it, by someone who was not tuning the scheduler, while others tuned on
the other suites, so that the figure it gives is that of graphs nobody tuned on.

Decoder layers (one in bfloat16 with multi-head latent attention, one with gated attention and
sandwich norms, one with DeepSeek-style sparse attention and hyper-connections), an MoE block
with group-limited routing, a language model's sampling step, two training steps (a causal
language model and a summarisation model, the latter an encoder-decoder), vision backbones and
a classifier (a convolutional document unwarper, a ViT with cropped position embeddings, a
ViT classifier), a promptable segmenter with a hierarchical encoder, a speech recogniser's
encoder-decoder step, a web-page (markup) model, an image-text matching model and a
screenshot-to-text model, built from the module code of `transformers` with tiny configs and
seeded random weights, from fifteen families used in none of the other suites
(fidelity_graphs, fidelity_tuning_hf, fidelity_heldout .. fidelity_heldout15) nor in any other
test (torchvision, timm and scipy are not installed). Some are new members of a line an
earlier suite took another member of, with modules of their own: Mistral 4 (Ministral 3:
held-out-14), LFM3 (LFM2: held-out-13), HY-V4 (Hunyuan: held-out-10, held-out-13, HY-V3:
held-out-15), SAM 2 (SAM: held-out-4, SAM-HQ: held-out-15), ViT-MSN (ViT: held-out), and
Cohere ASR's encoder is Parakeet's (held-out-9) under a decoder of its own. Small shapes
(batch 2, widths <= 64, sequences <= 32, images <= 32x32, one or two layers), so that the whole
suite compares in a few minutes. Chosen for what real workloads contain, before anything was
measured:

- mistral4_layer_bf16: Mistral 4's decoder layer in bfloat16: RMSNorms, multi-head latent
  attention (the query through a low-rank projection RMSNormed, keys and values expanded from
  a compressed latent RMSNormed, interleaved rotary on the rope part of the heads, the rope
  key shared by the heads) under a causal mask, a dense SwiGLU.
- lfm3_attention_layer: LFM3's attention layer: RMSNorms before and after each block (sandwich
  norms), per-head query and key RMSNorms, rotary, grouped-query attention under a causal mask,
  a sigmoid output gate per head, SwiGLU.
- hy_v4_layer: HY-V4's decoder layer on 4 residual streams: the hyper-connections (a float32
  RMS-normalised mixing of the streams into the block's input, sigmoid weights writing its
  output back to each stream), multi-head latent attention with a per-head output gate and
  learned attention sinks, the sparse-attention indexer (its own projections, LayerNormed key,
  rotary, ReLU scores weighted per head, the top 4 keys of 8 per query scattered into the
  mask), a dense SwiGLU.
- solar_open_moe_block: Solar Open's MoE block: a sigmoid router with a score-correction bias
  for the choice only, group-limited routing (the best 1 of 2 groups of 4 experts, by the sum
  of each group's top 2 scores), top-2 normalised and scaled weights, "batched_mm" SwiGLU
  experts, plus a shared expert.
- hyperclovax_lm_train_step: HyperCLOVA X's causal language model TRAINED one step: forward
  and backward (torch.func.grad of the shifted cross-entropy, every weight's gradient) on 16
  tokens: muP-style multipliers (embeddings, attention scale, residual branches, logits), two
  layers with RMSNorms before and after each block (Peri-LN), grouped-query attention with
  rotary, SwiGLU, the final RMSNorm and LM head.
- pegasus_summarization_train_step: Pegasus' summarisation model TRAINED one step: forward
  and backward (torch.func.grad of the cross-entropy, every weight's gradient) of a seq2seq
  step: a 16-token document under a padding mask, a summary of 8 (-100 padded) shifted right
  into the decoder's input, scaled embeddings, sinusoidal positions, a pre-LayerNorm encoder
  layer and decoder layer (causal self-attention, cross-attention, ReLU feed-forwards), the
  final LayerNorms, the tied LM head with its logits bias.
- mellum_lm_sampling_step: Mellum's causal LM (query and key RMSNorms, grouped-query
  attention, an MoE layer of top-2 of 4 "batched_mm" experts) and one step of sampling's
  logits processing: the last position's logits, a repetition penalty (gather, where,
  scatter), temperature, top-k, min-p (softmax, the max, masked_fill), the softmax.
- uvdoc_document_unwarper: UVDoc's document unwarper on a 32x32 photo of a page: strided conv
  stem, residual stages with dilated convs (BatchNorm, ReLU), the bridge of parallel dilated
  conv branches, their maps concatenated, a 1x1 connector, the point-position head (reflect-
  padded convs, PReLU) predicting the 2-D unwarping grid.
- radio_backbone: RADIO's ViT backbone on a 32x32 image: the input conditioner (mean and std
  normalisation), patches by reshape and a linear projection, position embeddings from a
  larger learned grid bilinearly resized to the patches' grid (CPE), class and register
  tokens, two layers with layer scale, the summary of the class tokens and the patch features.
- sam2_point_segmenter: SAM 2's promptable segmenter on a 32x32 image and two clicks (one
  foreground, one background): the Hiera encoder (windowed and global attention, query
  pooling between stages, background positions bicubically resized plus window positions
  tiled), the FPN neck
  with sine positions and nearest upsampling, the prompt encoder (random Fourier features of
  the points, label embeddings), the two-way transformer, the high-resolution features added
  in the upscaling (transposed convs, LayerNorm2d, GELU), the hypernetwork's mask and the IoU
  head.
- cohere_asr_transcription_step: Cohere ASR's speech recogniser, one decoding step on 32
  frames of 16 mel bins (the second 8 frames shorter): the Parakeet conformer encoder (conv
  subsampling, relative-position attention, the conv module with BatchNorm, macaron
  feed-forwards), a transformer decoder layer (causal
  self-attention, cross-attention under the encoder's padding mask, a ReLU feed-forward) on a
  6-token prompt, the LM head.
- markuplm_token_classifier: MarkupLM's token classifier and its loss on a web page of 16
  text nodes with their XPaths (tag and subscript ids per level, 6 levels, padded) under a
  padding mask: the XPath embeddings (per-level embeddings concatenated, a two-layer MLP),
  BERT embeddings, two layers, the head, the cross-entropy (-100 ignored).
- bridgetower_image_text_matching: BridgeTower's image-text matching on two 32x32 images and
  two captions of 12 tokens (the second 3 shorter): the CLIP vision transformer, the RoBERTa
  text encoder, the cross-modal layers (self- and cross-attention both ways) fed through
  bridge layers (link towers adding each uni-modal layer's output, LayerNorms), the poolers
  and the ITM head.
- pix2struct_chart_qa_step: Pix2Struct's screenshot-to-text model, one decoding step: 16
  flattened 4x4 patches with their row and column ids (the second image's last 4 padding),
  the patch projection and row and column embeddings, a T5-style encoder layer (RMSNorms,
  gated-GELU feed-forward) under the padding mask, a decoder layer with relative position
  buckets and cross-attention on an 8-token prompt, the LM head.
- vit_msn_image_classifier: ViT-MSN's image classifier on a 32x32 image: conv patch
  embeddings, the class token and learned positions, two pre-LayerNorm layers (GELU MLP), the
  final LayerNorm, the linear head on the class token.

Replaced before the list was committed (before any comparison on them), because Dynamo breaks
their graph or the module cannot be built here: longcat_flash_moe_block (LongCat-Flash's
zero-computation experts loop over the experts hit, read with nonzero and .item(): 5 graphs),
rt_detr_v2_object_detector (RT-DETRv2's deformable attention checks the spatial shapes against
the sequence length with a tensor condition: Tensor.item(), 9 graphs), videomt_video_segmenter
(VidEoMT's loss, built with the model, needs scipy). Set aside on reading, never written:
JetMoE's layer (its mixture of attention heads reads the expert sizes with .tolist()),
DEIMv2 (a D-FINE-like detector, D-FINE being held-out-12's NOT_COMPILED), and vision-language
models whose image-token check formats a tensor into its message (PaliGemma).

Measured blind at 1090/1130 (96%; 96.5% unrounded) on the tree it was written against
(3e3aeb9): Inductor's launches identical to one of ours with our departures off, 7 differing by
a departure that stays on, 6 by a part of Inductor not modelled, 27 unexplained (hyperclovax 5,
sam2 5, mistral4 4, pegasus 4, hy_v4 2, radio 2, bridgetower 2, pix2struct 2, mellum 1); no
graph misaligned, every graph's compiled code gives eager's results (the blind test's audit and
eager checks pass). With our departures on, 506/1130. The suite compared in 5 min 46 s (4 min
39 s with the summary; 3 min 27 s of CPU) on the shared machine, loaded about 6.5 on its 2
cores by the tuners. Not tuned on; no floor yet.

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


def _mistral4_layer_bf16():
    from transformers import Mistral4Config
    from transformers.models.mistral4.modeling_mistral4 import (
        Mistral4DecoderLayer,
        Mistral4RotaryEmbedding,
    )

    cfg = Mistral4Config(hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
                         num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=4,
                         kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=8, v_head_dim=8,
                         qk_nope_head_dim=8, first_k_dense_replace=1, vocab_size=64,
                         max_position_embeddings=32, attn_implementation="eager",
                         **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_seeded_norms(_normal_init(Mistral4DecoderLayer(cfg, 0)), 1.0))
    layer = layer.to(torch.bfloat16)
    rope = _eval(Mistral4RotaryEmbedding(cfg))

    def mistral4(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, attention_mask=mask, position_ids=position_ids,
                            position_embeddings=rope(x, position_ids)))

    return mistral4, lambda: (_r(2, 8, 32, dtype=torch.bfloat16), _positions(2, 8))


def _lfm3_attention_layer():
    from transformers import Lfm3Config
    from transformers.models.lfm3.modeling_lfm3 import Lfm3DecoderLayer, Lfm3RotaryEmbedding

    cfg = Lfm3Config(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=8, vocab_size=64,
                     max_position_embeddings=32, sliding_window=16,
                     layer_types=["conv", "full_attention"], attn_implementation="eager",
                     **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_seeded_norms(_normal_init(Lfm3DecoderLayer(cfg, 1)), 1.0))
    rope = _eval(Lfm3RotaryEmbedding(cfg))

    def lfm3(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, position_embeddings=rope(x, position_ids, "full_attention"),
                            attention_mask=mask,
                            position_ids=position_ids))

    return lfm3, lambda: (_r(2, 8, 32), _positions(2, 8))


def _hy_v4_layer():
    from transformers import HYV4Config
    from transformers.models.hy_v4.modeling_hy_v4 import HYV4DecoderLayer, HYV4RotaryEmbedding

    cfg = HYV4Config(vocab_size=64, hidden_size=32, intermediate_size=64,
                     moe_intermediate_size=16, num_hidden_layers=1, num_attention_heads=4,
                     head_dim=8, q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=8,
                     qk_rope_head_dim=8, v_head_dim=8, mlp_layer_types=["dense"],
                     index_topk=4, index_head_dim=8, index_n_heads=2, hc_mult=4,
                     max_position_embeddings=32, attn_implementation="eager",
                     **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _normal_init(HYV4DecoderLayer(cfg, 0))
    for name, p in layer.named_parameters():  # the hyper-connections' scales around 1
        if name.endswith("hc.scale"):
            torch.nn.init.normal_(p, mean=1.0, std=0.2)
    layer = _eval(_seeded_norms(layer, 1.0))
    rope = _eval(HYV4RotaryEmbedding(cfg))

    def hy_v4(streams, position_ids):
        mask = _causal_mask(streams.shape[1], streams.dtype, streams.device)
        return _first(layer(streams, attention_mask=mask, position_ids=position_ids,
                            position_embeddings=rope(streams, position_ids)))

    return hy_v4, lambda: (_r(2, 8, 4, 32), _positions(2, 8))


def _solar_open_moe_block():
    from transformers import SolarOpenConfig
    from transformers.models.solar_open.modeling_solar_open import SolarOpenMoE

    cfg = SolarOpenConfig(hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
                          num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                          head_dim=8, n_routed_experts=8, num_experts_per_tok=2, n_group=2,
                          topk_group=1, n_shared_experts=1, routed_scaling_factor=2.5,
                          vocab_size=64, experts_implementation="batched_mm",
                          **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    block = _normal_init(SolarOpenMoE(cfg))
    torch.nn.init.normal_(block.gate.e_score_correction_bias, std=0.2)  # zeros when fresh
    block = _eval(block)
    return (lambda x: block(x)), lambda: (_r(2, 8, 32),)


def _hyperclovax_lm_train_step():
    from transformers import HyperCLOVAXConfig
    from transformers.models.hyperclovax.modeling_hyperclovax import HyperCLOVAXForCausalLM

    cfg = HyperCLOVAXConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                            head_dim=8, max_position_embeddings=32, embedding_multiplier=2.0,
                            logits_scaling=0.5, residual_multiplier=0.8,
                            attention_multiplier=0.25, use_post_norm=True,
                            attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    model = _eval(_seeded_norms(HyperCLOVAXForCausalLM(cfg), 1.0))
    step = _grad_of(model, lambda out: out.loss)

    def hyperclovax(input_ids, labels):
        return step(input_ids=input_ids, labels=labels)

    def inputs():  # 16 tokens, the labels the inputs (shifted inside the loss)
        ids = torch.randint(0, 64, (2, 16))
        return ids, ids.clone()

    return hyperclovax, inputs


def _pegasus_summarization_train_step():
    from transformers import PegasusConfig
    from transformers.models.pegasus.modeling_pegasus import PegasusForConditionalGeneration

    cfg = PegasusConfig(vocab_size=64, max_position_embeddings=32, encoder_layers=1,
                        encoder_ffn_dim=64, encoder_attention_heads=4, decoder_layers=1,
                        decoder_ffn_dim=64, decoder_attention_heads=4, d_model=32,
                        encoder_layerdrop=0.0, decoder_layerdrop=0.0, dropout=0.0,
                        attention_dropout=0.0, activation_dropout=0.0, pad_token_id=0,
                        eos_token_id=1, decoder_start_token_id=0, scale_embedding=True,
                        init_std=0.2, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(PegasusForConditionalGeneration(cfg))
    step = _grad_of(model, lambda out: out.loss)

    def pegasus(input_ids, padding, labels):
        return step(input_ids=input_ids, attention_mask=padding, labels=labels)

    def inputs():  # a document of 16 tokens (the second 5 shorter), a summary of 8 (-100 padded)
        padding = _padding_inputs(16, 5)
        ids = torch.randint(2, 64, (2, 16)).masked_fill(padding == 0, 0)
        labels = torch.randint(2, 64, (2, 8))
        labels[1, 6:] = -100
        return ids, padding, labels

    return pegasus, inputs


def _mellum_lm_sampling_step():
    from transformers import MellumConfig
    from transformers.generation.logits_process import (
        MinPLogitsWarper,
        RepetitionPenaltyLogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
    )
    from transformers.models.mellum.modeling_mellum import MellumForCausalLM

    cfg = MellumConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                       max_position_embeddings=64, sliding_window=8, num_experts=4,
                       num_experts_per_tok=2, moe_intermediate_size=16,
                       experts_implementation="batched_mm", attn_implementation="eager",
                       **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    model = _eval(_seeded_norms(MellumForCausalLM(cfg), 1.0))
    processors = (RepetitionPenaltyLogitsProcessor(1.2), TemperatureLogitsWarper(0.8),
                  TopKLogitsWarper(16), MinPLogitsWarper(0.05))

    def mellum(input_ids):
        scores = model(input_ids=input_ids).logits[:, -1, :].float()
        for processor in processors:
            scores = processor(input_ids, scores)
        return scores.softmax(-1)

    return mellum, lambda: (torch.randint(0, 64, (2, 12)),)


def _uvdoc_document_unwarper():
    from transformers import UVDocBackboneConfig, UVDocConfig
    from transformers.models.uvdoc.modeling_uvdoc import UVDocModel

    backbone = UVDocBackboneConfig(resnet_head=[[3, 8], [8, 8]],
                                   resnet_configs=[[[8, 8, 1, False], [8, 8, 3, False]],
                                                   [[8, 16, 1, True], [16, 16, 3, False]],
                                                   [[16, 16, 1, False], [16, 16, 3, False]]],
                                   stage_configs=[[[16, 1]], [[16, 2]], [[16, 5]],
                                                  [[16, 8], [16, 3]]],
                                   out_features=["stage1", "stage2", "stage3", "stage4"],
                                   kernel_size=5)
    cfg = UVDocConfig(backbone_config=backbone, bridge_connector=[16, 32],
                      out_point_positions2D=[[32, 16], [16, 2]], kernel_size=5)
    torch.manual_seed(0)
    model = _eval(_with_bn_statistics(UVDocModel(cfg)))
    return (lambda pixels: _first(model(pixel_values=pixels))), lambda: (_r(2, 3, 32, 32),)


def _radio_backbone():
    from transformers import RadioConfig
    from transformers.models.radio.modeling_radio import RadioModel

    cfg = RadioConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2.0,
                      patch_size=8, image_size=32, max_img_size=64, num_cls_tokens=2,
                      num_registers=2, layerscale_value=0.5, attn_implementation="eager")
    torch.manual_seed(0)
    model = RadioModel(cfg)
    for name, p in model.named_parameters():  # fresh positions and tokens (zeros): seeded
        if "position_embedding" in name or "token" in name:
            torch.nn.init.normal_(p, std=0.2)
    model = _eval(model)

    def radio(pixels):
        out = model(pixel_values=pixels)
        return out.summary, out.features

    return radio, lambda: (torch.rand(2, 3, 32, 32),)


def _sam2_point_segmenter():
    from transformers import Sam2Config
    from transformers.models.sam2.modeling_sam2 import Sam2Model

    cfg = Sam2Config(
        vision_config={"backbone_config": {"model_type": "sam2_hiera_det_model",
                                           "hidden_size": 8, "image_size": [32, 32],
                                           "blocks_per_stage": [1, 1, 2, 1],
                                           "embed_dim_per_stage": [8, 16, 32, 64],
                                           "num_attention_heads_per_stage": [1, 1, 2, 2],
                                           "window_size_per_stage": [4, 2, 2, 1],
                                           "global_attention_blocks": [3],
                                           "window_positional_embedding_background_size":
                                               [2, 2], "mlp_ratio": 2.0},
                       "backbone_channel_list": [64, 32, 16, 8],
                       "backbone_feature_sizes": [[8, 8], [4, 4], [2, 2]],
                       "fpn_hidden_size": 16},
        prompt_encoder_config={"hidden_size": 16, "image_size": 32, "patch_size": 16,
                               "mask_input_channels": 4},
        mask_decoder_config={"hidden_size": 16, "mlp_dim": 32, "num_hidden_layers": 1,
                             "num_attention_heads": 2, "iou_head_hidden_dim": 16},
        initializer_range=0.2)
    torch.manual_seed(0)
    model = Sam2Model(cfg)
    for name, p in model.named_parameters():  # fresh positions and tokens (zeros): seeded
        if "pos_embed" in name or "no_memory" in name:
            torch.nn.init.normal_(p, std=0.2)
    model = _eval(model)

    def sam2(pixels, points, labels):
        out = model(pixel_values=pixels, input_points=points, input_labels=labels,
                    multimask_output=False)
        return out.pred_masks, out.iou_scores

    def inputs():  # one foreground and one background click per image
        return _r(2, 3, 32, 32), torch.rand(2, 1, 2, 2) * 32, torch.tensor([[[1, 0]], [[1, 0]]])

    return sam2, inputs


def _cohere_asr_transcription_step():
    from transformers import CohereAsrConfig
    from transformers.models.cohere_asr.modeling_cohere_asr import (
        CohereAsrForConditionalGeneration,
    )

    cfg = CohereAsrConfig(
        encoder_config={"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4,
                        "intermediate_size": 64, "conv_kernel_size": 5, "subsampling_factor": 4,
                        "subsampling_conv_channels": 16, "num_mel_bins": 16,
                        "max_position_embeddings": 64},
        vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=32, pad_token_id=2, eos_token_id=3,
        bos_token_id=4, decoder_start_token_id=4, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(_with_bn_statistics(CohereAsrForConditionalGeneration(cfg),
                                      torch.nn.BatchNorm1d))

    def cohere_asr(features, padding, decoder_ids):
        return model(input_features=features, attention_mask=padding,
                     decoder_input_ids=decoder_ids).logits

    # 32 frames of 16 mel bins (the second 8 frames shorter), a prompt of 6 decoder tokens
    return cohere_asr, lambda: (_r(2, 32, 16), _padding_inputs(32, 8),
                                torch.randint(5, 64, (2, 6)))


def _markuplm_token_classifier():
    from transformers import MarkupLMConfig
    from transformers.models.markuplm.modeling_markuplm import MarkupLMForTokenClassification

    cfg = MarkupLMConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, intermediate_size=64, max_position_embeddings=32,
                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                         max_xpath_tag_unit_embeddings=16, max_xpath_subs_unit_embeddings=24,
                         tag_pad_id=15, subs_pad_id=23, xpath_unit_hidden_size=8, max_depth=6,
                         num_labels=5, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(MarkupLMForTokenClassification(cfg))

    def markuplm(input_ids, tags, subs, padding, labels):
        out = model(input_ids=input_ids, xpath_tags_seq=tags, xpath_subs_seq=subs,
                    attention_mask=padding, labels=labels)
        return out.loss, out.logits

    def inputs():  # 16 nodes' text with their xpaths (6 levels, padded), the second 4 shorter
        padding = _padding_inputs(16, 4)
        depth = torch.randint(2, 7, (2, 16, 1))
        levels = torch.arange(6)[None, None, :] < depth
        tags = torch.randint(0, 15, (2, 16, 6)).masked_fill(~levels, 15)
        subs = torch.randint(0, 23, (2, 16, 6)).masked_fill(~levels, 23)
        labels = torch.randint(0, 5, (2, 16)).masked_fill(padding == 0, -100)
        ids = torch.randint(3, 64, (2, 16)).masked_fill(padding == 0, 1)
        return ids, tags, subs, padding, labels

    return markuplm, inputs


def _bridgetower_image_text_matching():
    from transformers import BridgeTowerConfig
    from transformers.models.bridgetower.modeling_bridgetower import (
        BridgeTowerForImageAndTextRetrieval,
    )

    cfg = BridgeTowerConfig(
        text_config={"vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "intermediate_size": 64,
                     "max_position_embeddings": 32, "hidden_dropout_prob": 0.0,
                     "attention_probs_dropout_prob": 0.0},
        vision_config={"hidden_size": 64, "num_hidden_layers": 2, "image_size": 32,
                       "patch_size": 8},
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        share_cross_modal_transformer_layers=True, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(BridgeTowerForImageAndTextRetrieval(cfg))

    def bridgetower(input_ids, padding, pixels):
        return model(input_ids=input_ids, attention_mask=padding, pixel_values=pixels).logits

    def inputs():  # two captions of 12 tokens (the second 3 shorter), two 32x32 images
        padding = _padding_inputs(12, 3)
        return torch.randint(3, 64, (2, 12)).masked_fill(padding == 0, 1), padding, _r(
            2, 3, 32, 32)

    return bridgetower, inputs


def _pix2struct_chart_qa_step():
    from transformers import Pix2StructConfig
    from transformers.models.pix2struct.modeling_pix2struct import (
        Pix2StructForConditionalGeneration,
    )

    cfg = Pix2StructConfig(
        text_config={"vocab_size": 64, "hidden_size": 32, "d_kv": 8, "d_ff": 64,
                     "num_layers": 1, "num_heads": 4, "relative_attention_num_buckets": 8,
                     "relative_attention_max_distance": 16, "dropout_rate": 0.0},
        vision_config={"hidden_size": 32, "patch_embed_hidden_size": 48, "d_ff": 64, "d_kv": 8,
                       "num_hidden_layers": 1, "num_attention_heads": 4, "seq_len": 16,
                       "dropout_rate": 0.0},
        is_vqa=True, initializer_range=0.2)
    torch.manual_seed(0)
    model = _eval(Pix2StructForConditionalGeneration(cfg))

    def pix2struct(patches, padding, decoder_ids):
        return model(flattened_patches=patches, attention_mask=padding,
                     decoder_input_ids=decoder_ids).logits

    def inputs():  # 16 flattened 4x4 patches (row, column, 48 pixels), the second 4 padding
        padding = _padding_inputs(16, 4)
        rows = torch.arange(16) // 4 + 1
        cols = torch.arange(16) % 4 + 1
        ids = torch.stack([rows, cols], -1).expand(2, 16, 2).float()
        patches = torch.cat([ids, _r(2, 16, 48)], -1) * padding[..., None]
        return patches, padding, torch.randint(2, 64, (2, 8))

    return pix2struct, inputs


def _vit_msn_image_classifier():
    from transformers import ViTMSNConfig
    from transformers.models.vit_msn.modeling_vit_msn import ViTMSNForImageClassification

    cfg = ViTMSNConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=64, image_size=32, patch_size=8, num_labels=10,
                       attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(ViTMSNForImageClassification(cfg))
    return (lambda pixels: model(pixel_values=pixels).logits), lambda: (_r(2, 3, 32, 32),)


_BUILDERS = {
    "mistral4_layer_bf16": _mistral4_layer_bf16,
    "lfm3_attention_layer": _lfm3_attention_layer,
    "hy_v4_layer": _hy_v4_layer,
    "solar_open_moe_block": _solar_open_moe_block,
    "hyperclovax_lm_train_step": _hyperclovax_lm_train_step,
    "pegasus_summarization_train_step": _pegasus_summarization_train_step,
    "mellum_lm_sampling_step": _mellum_lm_sampling_step,
    "uvdoc_document_unwarper": _uvdoc_document_unwarper,
    "radio_backbone": _radio_backbone,
    "sam2_point_segmenter": _sam2_point_segmenter,
    "cohere_asr_transcription_step": _cohere_asr_transcription_step,
    "markuplm_token_classifier": _markuplm_token_classifier,
    "bridgetower_image_text_matching": _bridgetower_image_text_matching,
    "pix2struct_chart_qa_step": _pix2struct_chart_qa_step,
    "vit_msn_image_classifier": _vit_msn_image_classifier,
}

# Graphs whose audit fails, kept in the suite (their launches counted in its figure): none yet.
NOT_ALIGNED: dict[str, str] = {}

# Graphs our compiler or the comparison failed on when the suite was written (see the module
# docstring), kept for the record: replaced before any figure of theirs was seen.
NOT_COMPILED: dict[str, str] = {}


def heldout16_graphs() -> dict:
    """{name: (fn, make_inputs)}, modules built (with seeded weights) on first call."""
    torch.manual_seed(0)
    return {name: build() for name, build in _BUILDERS.items()}
