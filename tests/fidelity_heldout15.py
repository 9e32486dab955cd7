"""The FIFTEENTH HELD-OUT fidelity suite, written blind: its list of graphs was committed before
any comparison was run on it, by someone who was not tuning the scheduler, while others tuned on
the other suites, so that the figure it gives is that of graphs nobody tuned on.

Decoder layers (one in bfloat16, one with multi-head latent attention, one with compressed
convolutional attention), an MoE block with a bias-corrected sigmoid router, a language model's
sampling step, two training steps (a masked language model and a translation model, the latter
an encoder-decoder), vision backbones (a pose estimator, a video classifier), an open-vocabulary
detector, a promptable segmenter, a speech codec's encoder, a document model and an image-text
contrastive model, built from the module code of `transformers` with tiny configs and seeded
random weights, from fifteen families used in none of the other suites (fidelity_graphs,
fidelity_tuning_hf, fidelity_heldout .. fidelity_heldout14) nor in any other test
(torchvision and timm are not installed). Some are new members of a line an earlier suite took
another member of, with modules of their own: HY-V3 (Hunyuan: held-out-10 and held-out-13),
OWLv2 (OWL-ViT: held-out-6), SAM-HQ (SAM: held-out-4), Chinese-CLIP (CLIP: held-out). Small
shapes (batch 2, widths <= 64, sequences <= 32, images <= 32x32, one or two layers), so that
the whole suite compares in a few minutes. Chosen for what real workloads contain, before
anything was measured:

- youtu_layer_bf16: Youtu-LLM's decoder layer in bfloat16: RMSNorms, multi-head latent
  attention (the query through a low-rank projection RMSNormed, keys and values from a
  compressed latent RMSNormed, interleaved rotary on a split of the heads, the rope part of
  the key shared by the heads) under a causal mask, SwiGLU.
- laguna_layer: Laguna's decoder layer: RMSNorms, per-head query and key RMSNorms, rotary,
  grouped-query attention under a causal mask, the output gated per head (softplus of a
  projection, in float32), SwiGLU.
- zaya_layer: ZAYA's decoder layer: RMSNorms with a float32 residual stream, compressed
  convolutional attention (queries and keys mixed by a causal depthwise conv and a grouped
  conv after left padding, residual query and key paths averaged over the groups, half of
  each value head delayed one token), L2 query and key norms with a learned per-head key
  scale, rotary, grouped-query attention under a causal mask, learned residual scalings, the
  MoE (a router MLP, top-1 of 4 "batched_mm" experts).
- afmoe_moe_block: AFMoE's MoE block: a float32 sigmoid router with an expert bias for the
  choice only, top-2 of 8 experts, normalised and scaled weights, "batched_mm" SwiGLU
  experts, plus a shared expert.
- eurobert_mlm_train_step: EuroBERT's masked language model TRAINED one step: forward and
  backward (torch.func.grad of the cross-entropy on a quarter of the tokens masked, -100
  elsewhere, every weight's gradient) on 16 tokens under a bidirectional padding mask: two
  Llama-style layers (RMSNorms, rotary, SwiGLU), the final RMSNorm, the MLM head.
- m2m_100_translation_train_step: M2M-100's translation model TRAINED one step: forward and
  backward (torch.func.grad of the cross-entropy, every weight's gradient) of a seq2seq step:
  a 12-token source under a padding mask, the labels shifted right into the decoder's input
  (-100 replaced by the padding token), scaled embeddings, sinusoidal positions computed
  from the non-padding tokens' cumulative count, a pre-LayerNorm encoder layer and decoder
  layer (causal self-attention, cross-attention, ReLU feed-forwards), the tied LM head.
- hy_v3_lm_sampling_step: HY-V3's causal LM (query and key RMSNorms, grouped-query
  attention, a dense SwiGLU layer) and one step of sampling's logits processing: the last
  position's logits, temperature, top-p (sort, softmax, cumsum, the sorted mask scattered
  back, masked_fill), the softmax.
- sapiens2_pose_estimator: Sapiens2's human pose estimator on a 32x32 image: conv patch
  embeddings, a class token and register tokens, 2-D rotary positions on the patches, two
  layers (RMSNorms, query and key norms, grouped-query attention, gated MLP, layer scale),
  the patches folded back to a map, the heatmap head (a transposed conv, InstanceNorm, a
  conv, the 1x1 predictor of 6 keypoints).
- vjepa2_video_classifier: V-JEPA 2's video classifier on 4 frames of 16x16: tubelet
  embeddings (a 3-D conv over 2 frames), two layers with 3-D rotary attention (time, height,
  width frequencies on thirds of the head), the attentive pooler (self-attention over the
  tokens, a learned query cross-attending to them), the linear head.
- pixio_backbone: Pixio's ViT backbone on a 32x32 image: conv patch embeddings, 4 class
  tokens, learned positions, two pre-LayerNorm layers (GELU MLP), the LayerNormed patch
  tokens of both layers reshaped into feature maps.
- owlv2_object_detector: OWLv2's open-vocabulary detector on a 32x32 image and two text
  queries per image (8 tokens, one query shorter): the CLIP-style text transformer (causal
  and padding masks, the end-of-text token by argmax), the vision transformer with its
  class token merged into every patch token, the class head (normalised embeddings, a
  learned shift and scale, the query mask), the box head with its grid bias and sigmoid,
  the objectness head.
- sam_hq_point_segmenter: SAM-HQ's promptable segmenter on a 32x32 image and two clicks
  (one foreground, one background): the ViT encoder (absolute positions, windowed and global
  attention with decomposed relative positions), the neck, the prompt encoder (random
  Fourier features of the points, label embeddings), the two-way transformer, the
  high-quality output token fusing early ViT features (transposed convs, LayerNorm2d, GELU)
  into the mask features, the hypernetworks' masks and the IoU head.
- vibevoice_acoustic_encoder: VibeVoice's acoustic tokenizer encoder on 256 samples of
  waveform: a causal conv stem, ConvNeXt-style 1-D blocks (RMSNorm, causal depthwise conv
  mixer, GELU feed-forward, layer scales), strided causal downsampling convs, the head conv
  to latents.
- lilt_token_classifier: LiLT's token classifier and its loss on a form of 16 words with
  their boxes under a padding mask: the text stream (BERT embeddings) and the layout stream
  (box coordinate, width and height embeddings), two layers whose attention scores are
  shared across streams (bi-directional attention complementation), the head, the
  cross-entropy (-100 ignored).
- chinese_clip_contrastive_loss: Chinese-CLIP's image-text contrastive loss on two 32x32
  images and two captions of 12 tokens (the second 4 shorter): the BERT text encoder under
  the padding mask (its first token taken), the CLIP vision transformer (pre-LayerNorm,
  quick-GELU), the normalised projections, the logit scale, the symmetric cross-entropy.

Replaced before the list was committed (before any comparison on them), because Dynamo
breaks their graph: siglip2_image_classifier (SigLIP 2's NaFlex position embeddings are
resized per image with sizes read from a tensor: aten._local_scalar_dense).

Measured blind at 881/954 (92%; 92.3% unrounded) on the tree it was written against (e2e3d40):
Inductor's launches identical to one of ours with our departures off, 28 differing by a
departure that stays on, 13 by a part of Inductor not modelled, 32 unexplained (sam_hq 9,
eurobert 5, youtu 4, zaya 3, vibevoice 3, laguna 2, sapiens2 2, vjepa2 2, chinese_clip 2); no
graph misaligned, every graph's compiled code gives eager's results. The suite compared in
3 min (2 min 59 s, 3 min 43 s with the summary) on the shared machine.

After the round that did not look at it (2026-11-29: a copy a matmul reads through a reshape
stored as the reshape, an inlined embedding's loads through its index in the tiling check,
Inductor's op count of unrolled reductions, gathers, aranges and pointwise cats), on b594c81:
878/954 (92%; 92.0% unrounded), no graph misaligned; m2m_100 137 -> 134, the other fourteen
graphs unchanged. 56 unexplained: the comparison became stricter in that round (a value
Inductor recomputes in each reader and ours stores once is no longer counted as our
computed_once departure when that departure is off). Not tuned on; its floor, 0.91, guards
against regressions.

The training steps differentiate with `torch.func.grad` inside the compiled function, so that
forward and backward are one graph (the comparison compiles one graph per entry). Each entry:
a function of tensors and a maker of small CPU inputs. Do not change the scheduler's rules
while looking at these graphs: the figure is only honest while no rule was tuned against
them."""

import torch
from fidelity_heldout import _causal_mask, _eval, _first, _positions, _r
from fidelity_heldout4 import _normal_init
from fidelity_heldout7 import _padding_inputs
from fidelity_heldout9 import _NO_SPECIAL_TOKENS, _seeded_norms
from fidelity_heldout10 import _grad_of


def _youtu_layer_bf16():
    from transformers import YoutuConfig
    from transformers.models.youtu.modeling_youtu import YoutuDecoderLayer, YoutuRotaryEmbedding

    cfg = YoutuConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=16,
                      q_lora_rank=24, qk_rope_head_dim=8, v_head_dim=8, qk_nope_head_dim=8,
                      vocab_size=64, max_position_embeddings=32,
                      attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_seeded_norms(_normal_init(YoutuDecoderLayer(cfg, 0)), 1.0))
    layer = layer.to(torch.bfloat16)
    rope = _eval(YoutuRotaryEmbedding(cfg))

    def youtu(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, attention_mask=mask, position_ids=position_ids,
                            position_embeddings=rope(x, position_ids)))

    return youtu, lambda: (_r(2, 8, 32, dtype=torch.bfloat16), _positions(2, 8))


def _laguna_layer():
    from transformers import LagunaConfig
    from transformers.models.laguna.modeling_laguna import (
        LagunaDecoderLayer,
        LagunaRotaryEmbedding,
    )

    cfg = LagunaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                       vocab_size=64, max_position_embeddings=32, sliding_window=16,
                       layer_types=["full_attention"], mlp_layer_types=["dense"],
                       gating="per-head", attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_seeded_norms(_normal_init(LagunaDecoderLayer(cfg, 0)), 1.0))
    rope = _eval(LagunaRotaryEmbedding(cfg))

    def laguna(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, attention_mask=mask, position_ids=position_ids,
                            position_embeddings=rope(x, position_ids, "full_attention")))

    return laguna, lambda: (_r(2, 8, 32), _positions(2, 8))


def _zaya_layer():
    from transformers import ZayaConfig
    from transformers.models.zaya.modeling_zaya import ZayaDecoderLayer, ZayaRotaryEmbedding

    cfg = ZayaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=8, moe_intermediate_size=32,
                     num_experts=4, num_experts_per_tok=1, router_hidden_size=16,
                     vocab_size=64, max_position_embeddings=32,
                     experts_implementation="batched_mm", attn_implementation="eager",
                     **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = ZayaDecoderLayer(cfg, 0)
    torch.nn.init.normal_(layer.self_attn.qk_norm.temp, mean=1.0, std=0.2)  # zeros when fresh
    layer = _eval(_seeded_norms(_normal_init(layer), 1.0))
    rope = _eval(ZayaRotaryEmbedding(cfg))

    def zaya(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, attention_mask={"causal": mask},
                            position_embeddings=rope(x, position_ids, cfg.layer_types[0])))

    return zaya, lambda: (_r(2, 8, 32), _positions(2, 8))


def _afmoe_moe_block():
    from transformers import AfmoeConfig
    from transformers.models.afmoe.modeling_afmoe import AfmoeSparseMoeBlock

    cfg = AfmoeConfig(hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
                      num_hidden_layers=2, num_dense_layers=1, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=8, num_experts=8, num_experts_per_tok=2,
                      num_shared_experts=1, route_scale=2.0, vocab_size=64,
                      experts_implementation="batched_mm", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    block = _normal_init(AfmoeSparseMoeBlock(cfg))
    torch.nn.init.normal_(block.expert_bias, std=0.2)  # zeros when fresh
    block = _eval(block)
    return (lambda x: block(x)), lambda: (_r(2, 8, 32),)


def _hy_v3_lm_sampling_step():
    from transformers import HYV3Config
    from transformers.generation.logits_process import (
        TemperatureLogitsWarper,
        TopPLogitsWarper,
    )
    from transformers.models.hy_v3.modeling_hy_v3 import HYV3ForCausalLM

    cfg = HYV3Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                     max_position_embeddings=64, num_experts=4, num_experts_per_tok=2,
                     moe_intermediate_size=16, mlp_layer_types=["dense"],
                     attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    model = _eval(_seeded_norms(HYV3ForCausalLM(cfg), 1.0))
    processors = (TemperatureLogitsWarper(0.7), TopPLogitsWarper(0.9))

    def hy_v3(input_ids):
        scores = model(input_ids=input_ids).logits[:, -1, :].float()
        for processor in processors:
            scores = processor(input_ids, scores)
        return scores.softmax(-1)

    return hy_v3, lambda: (torch.randint(0, 64, (2, 12)),)


def _eurobert_mlm_train_step():
    from transformers import EuroBertConfig
    from transformers.models.eurobert.modeling_eurobert import EuroBertForMaskedLM

    cfg = EuroBertConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=32, pad_token_id=0, bos_token_id=1,
                         eos_token_id=2, mask_token_id=3, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(EuroBertForMaskedLM(cfg))
    step = _grad_of(model, lambda out: out.loss)

    def eurobert(input_ids, padding, labels):
        return step(input_ids=input_ids, attention_mask=padding, labels=labels)

    def inputs():  # 16 tokens, the second 4 shorter, a quarter masked (the others' labels -100)
        padding = _padding_inputs(16, 4)
        ids = torch.randint(4, 64, (2, 16)).masked_fill(padding == 0, 0)
        masked = (torch.rand(2, 16) < 0.25) & (padding == 1)
        masked[:, 1] = True
        labels = ids.masked_fill(~masked, -100)
        return ids.masked_fill(masked, 3), padding, labels

    return eurobert, inputs


def _m2m_100_translation_train_step():
    from transformers import M2M100Config
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100ForConditionalGeneration

    cfg = M2M100Config(vocab_size=64, max_position_embeddings=32, encoder_layers=1,
                       encoder_ffn_dim=64, encoder_attention_heads=4, decoder_layers=1,
                       decoder_ffn_dim=64, decoder_attention_heads=4, d_model=32,
                       encoder_layerdrop=0.0, decoder_layerdrop=0.0, dropout=0.0,
                       attention_dropout=0.0, activation_dropout=0.0, pad_token_id=1,
                       bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
                       init_std=0.2, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(M2M100ForConditionalGeneration(cfg))
    step = _grad_of(model, lambda out: out.loss)

    def m2m_100(input_ids, padding, labels):
        return step(input_ids=input_ids, attention_mask=padding, labels=labels)

    def inputs():  # a source of 12 tokens (the second 3 shorter), a target of 10 (-100 padded)
        padding = _padding_inputs(12, 3)
        ids = torch.randint(3, 64, (2, 12)).masked_fill(padding == 0, 1)
        labels = torch.randint(3, 64, (2, 10))
        labels[1, 7:] = -100
        return ids, padding, labels

    return m2m_100, inputs


def _sapiens2_pose_estimator():
    from transformers import Sapiens2Config
    from transformers.models.sapiens2.modeling_sapiens2 import Sapiens2ForPoseEstimation

    cfg = Sapiens2Config(patch_size=8, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_attention_heads=2, image_size=32,
                         num_register_tokens=2, num_first_full_attention_layers=1,
                         num_last_full_attention_layers=1, num_labels=6,
                         head_config={"upsample_out_channels": [16],
                                      "conv_out_channels": [16]},
                         attn_implementation="eager")
    torch.manual_seed(0)
    model = Sapiens2ForPoseEstimation(cfg)
    for name, p in model.named_parameters():  # fresh tokens and norms: seeded
        if "token" in name or "norm" in name:
            torch.nn.init.normal_(p, mean=1.0 if name.endswith("norm.weight") else 0.0,
                                  std=0.2)
    model = _eval(model)
    return (lambda pixels: model(pixel_values=pixels).heatmaps), lambda: (_r(2, 3, 32, 32),)


def _vjepa2_video_classifier():
    from transformers import VJEPA2Config
    from transformers.models.vjepa2.modeling_vjepa2 import VJEPA2ForVideoClassification

    cfg = VJEPA2Config(patch_size=8, crop_size=16, frames_per_clip=4, tubelet_size=2,
                       hidden_size=32, num_attention_heads=4, num_hidden_layers=2,
                       mlp_ratio=2.0, num_pooler_layers=1, pred_hidden_size=32,
                       pred_num_attention_heads=4, pred_num_hidden_layers=1, num_labels=5,
                       attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(VJEPA2ForVideoClassification(cfg))
    return (lambda video: model(pixel_values_videos=video).logits), lambda: (
        _r(2, 4, 3, 16, 16),)


def _pixio_backbone():
    from transformers import PixioConfig
    from transformers.models.pixio.modeling_pixio import PixioBackbone

    cfg = PixioConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2,
                      image_size=32, patch_size=8, n_cls_tokens=4,
                      out_features=["stage1", "stage2"])
    torch.manual_seed(0)
    model = PixioBackbone(cfg)
    for name, p in model.named_parameters():  # fresh class tokens and positions: seeded
        if "cls_token" in name or "position_embeddings" in name:
            torch.nn.init.normal_(p, std=0.2)
    model = _eval(model)
    return (lambda pixels: tuple(model(pixel_values=pixels).feature_maps)), lambda: (
        _r(2, 3, 32, 32),)


def _owlv2_object_detector():
    from transformers import Owlv2Config
    from transformers.models.owlv2.modeling_owlv2 import Owlv2ForObjectDetection

    cfg = Owlv2Config(
        text_config={"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 1, "num_attention_heads": 4,
                     "max_position_embeddings": 8},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                       "num_attention_heads": 4, "image_size": 32, "patch_size": 8},
        projection_dim=32)
    torch.manual_seed(0)
    model = _eval(Owlv2ForObjectDetection(cfg))

    def owlv2(input_ids, padding, pixels):
        out = model(input_ids=input_ids, attention_mask=padding, pixel_values=pixels)
        return out.logits, out.pred_boxes, out.objectness_logits

    def inputs():  # two text queries per image, of 8 tokens (the second 3 shorter)
        ids = torch.randint(1, 62, (4, 8))
        ids[:, 0] = 62
        ids[:, -1] = 63
        ids[1, 4] = 63
        padding = torch.ones(4, 8, dtype=torch.long)
        padding[1, 5:] = 0
        return ids, padding, _r(2, 3, 32, 32)

    return owlv2, inputs


def _sam_hq_point_segmenter():
    from transformers import SamHQConfig
    from transformers.models.sam_hq.modeling_sam_hq import SamHQModel

    cfg = SamHQConfig(
        vision_config={"hidden_size": 32, "output_channels": 16, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "image_size": 32, "patch_size": 8,
                       "window_size": 2, "global_attn_indexes": [1], "num_pos_feats": 8,
                       "mlp_dim": 64, "initializer_range": 0.2},
        prompt_encoder_config={"hidden_size": 16, "image_size": 32, "patch_size": 8,
                               "mask_input_channels": 4},
        mask_decoder_config={"hidden_size": 16, "mlp_dim": 32, "num_hidden_layers": 1,
                             "num_attention_heads": 2, "iou_head_hidden_dim": 16,
                             "vit_dim": 32},
        initializer_range=0.2)
    torch.manual_seed(0)
    model = SamHQModel(cfg)
    for name, p in model.named_parameters():  # fresh positions (zeros): seeded
        if "pos_embed" in name or "rel_pos" in name:
            torch.nn.init.normal_(p, std=0.2)
    model = _eval(model)

    def sam_hq(pixels, points, labels):
        out = model(pixel_values=pixels, input_points=points, input_labels=labels,
                    multimask_output=False)
        return out.pred_masks, out.iou_scores

    def inputs():  # one foreground and one background click per image
        return _r(2, 3, 32, 32), torch.rand(2, 1, 2, 2) * 32, torch.tensor([[[1, 0]], [[1, 0]]])

    return sam_hq, inputs


def _vibevoice_acoustic_encoder():
    from transformers import VibeVoiceAcousticTokenizerEncoderConfig
    from transformers.models.vibevoice_acoustic_tokenizer.modeling_vibevoice_acoustic_tokenizer import (  # noqa: E501
        VibeVoiceAcousticTokenizerEncoderModel,
    )

    cfg = VibeVoiceAcousticTokenizerEncoderConfig(hidden_size=16, num_filters=8,
                                                  downsampling_ratios=[2, 4],
                                                  depths=[1, 1, 1], kernel_size=7,
                                                  ffn_expansion=2,
                                                  layer_scale_init_value=0.1,
                                                  initializer_range=0.2)
    torch.manual_seed(0)
    model = _eval(_seeded_norms(VibeVoiceAcousticTokenizerEncoderModel(cfg), 1.0))
    return (lambda audio: model(audio).latents), lambda: (_r(2, 1, 256),)


def _lilt_token_classifier():
    from transformers import LiltConfig
    from transformers.models.lilt.modeling_lilt import LiltForTokenClassification

    cfg = LiltConfig(vocab_size=64, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=32, num_labels=5,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                     channel_shrink_ratio=4, max_2d_position_embeddings=64,
                     attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(LiltForTokenClassification(cfg))

    def lilt(input_ids, boxes, padding, labels):
        out = model(input_ids=input_ids, bbox=boxes, attention_mask=padding, labels=labels)
        return out.loss, out.logits

    def inputs():  # 16 words and their boxes (x0, y0, x1, y1 in 0..63), the second 4 shorter
        padding = _padding_inputs(16, 4)
        corners = torch.randint(0, 48, (2, 16, 2))
        boxes = torch.cat([corners, corners + torch.randint(1, 16, (2, 16, 2))], -1)
        labels = torch.randint(0, 5, (2, 16)).masked_fill(padding == 0, -100)
        ids = torch.randint(3, 64, (2, 16)).masked_fill(padding == 0, 1)
        return ids, boxes * padding[..., None], padding, labels

    return lilt, inputs


def _chinese_clip_contrastive_loss():
    from transformers import ChineseCLIPConfig
    from transformers.models.chinese_clip.modeling_chinese_clip import ChineseCLIPModel

    cfg = ChineseCLIPConfig(
        text_config={"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 1, "num_attention_heads": 4,
                     "max_position_embeddings": 16, "hidden_dropout_prob": 0.0,
                     "attention_probs_dropout_prob": 0.0},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                       "num_attention_heads": 4, "image_size": 32, "patch_size": 8,
                       "projection_dim": 16},
        projection_dim=16, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(ChineseCLIPModel(cfg))

    def chinese_clip(input_ids, padding, pixels):
        return model(input_ids=input_ids, attention_mask=padding, pixel_values=pixels,
                     return_loss=True).loss

    def inputs():  # two captions of 12 tokens (the second 4 shorter), two 32x32 images
        padding = _padding_inputs(12, 4)
        return torch.randint(1, 64, (2, 12)).masked_fill(padding == 0, 0), padding, _r(
            2, 3, 32, 32)

    return chinese_clip, inputs


_BUILDERS = {
    "youtu_layer_bf16": _youtu_layer_bf16,
    "laguna_layer": _laguna_layer,
    "zaya_layer": _zaya_layer,
    "afmoe_moe_block": _afmoe_moe_block,
    "eurobert_mlm_train_step": _eurobert_mlm_train_step,
    "m2m_100_translation_train_step": _m2m_100_translation_train_step,
    "hy_v3_lm_sampling_step": _hy_v3_lm_sampling_step,
    "sapiens2_pose_estimator": _sapiens2_pose_estimator,
    "vjepa2_video_classifier": _vjepa2_video_classifier,
    "pixio_backbone": _pixio_backbone,
    "owlv2_object_detector": _owlv2_object_detector,
    "sam_hq_point_segmenter": _sam_hq_point_segmenter,
    "vibevoice_acoustic_encoder": _vibevoice_acoustic_encoder,
    "lilt_token_classifier": _lilt_token_classifier,
    "chinese_clip_contrastive_loss": _chinese_clip_contrastive_loss,
}

# Graphs whose audit fails, kept in the suite (their launches counted in its figure): none yet.
NOT_ALIGNED: dict[str, str] = {}

# Graphs our compiler or the comparison failed on when the suite was written (see the module
# docstring), kept for the record: replaced before any figure of theirs was seen.
NOT_COMPILED: dict[str, str] = {}


def heldout15_graphs() -> dict:
    """{name: (fn, make_inputs)}, modules built (with seeded weights) on first call."""
    torch.manual_seed(0)
    return {name: build() for name, build in _BUILDERS.items()}
