"""The EIGHTH HELD-OUT fidelity suite, written blind: its list of graphs was committed before any
comparison was run on it, by someone who was not tuning the scheduler, while others tuned on
the other suites, so that the figure it gives is that of graphs nobody tuned on.

Blocks, heads, losses and one training step of real models built from the module code of
`transformers` with tiny configs and seeded random weights, from families used in none of the
other suites (fidelity_graphs, fidelity_tuning_hf, fidelity_heldout .. fidelity_heldout7).
Small shapes, so that the whole suite compares in about a minute. Chosen for what real
workloads contain, before anything was measured:

- diffllama_layer: DiffLlama's decoder layer, differential attention (two softmax attentions
  sharing queries and keys over the two halves of the values, the second subtracted with a
  learned lambda made of exp(sum(q * k)) of four vectors), a per-head RMSNorm without
  weight, grouped-query attention, rotary, SwiGLU.
- bitnet_layer_bf16: BitNet b1.58's decoder layer in bfloat16 (the unquantized module code),
  sub-norms inside the attention (before o_proj) and the MLP (before down_proj), the squared
  ReLU (relu2) gate, rotary, grouped-query attention.
- apertus_layer: Apertus' decoder layer, the xIELU activation (softplus of learned alphas, a
  where between a quadratic and expm1 of a min), an up/down MLP without gate, RMSNorm on
  queries and keys per head, rotary.
- exaone4_layer_train_step: EXAONE-4's decoder layer TRAINED one step: forward and backward
  (torch.func.grad of an MSE loss against a target, the gradient of every weight returned);
  post-norms only (RMSNorm after attention and after the MLP, none before), QK-norm, rotary.
- llama4_text_moe_bf16: Llama 4's MoE in bfloat16, the router's top-1 scattered into -inf
  then a sigmoid, every expert run on every token (inputs scaled by their score, batched
  matmuls on 3-D weights), a shared expert added in place.
- qwen3_next_gated_deltanet: Qwen3-Next's Gated DeltaNet (linear attention, recurrent) without
  its CUDA kernels (the torch path): fused qkvz/ba projections, a causal depthwise conv1d with
  SiLU, L2-normalised queries and keys, the chunked gated delta rule (cumulative log decay,
  triangular solves, the chunk scan), a gated RMSNorm (SiLU of z), out projection.
- funnel_encoder: Funnel Transformer's encoder, two blocks with the sequence pooled between
  them (mean pool of the queries, the class token kept apart), relative positional attention
  with the relative shift, token-type biases, a padding mask, post-LN.
- blip2_qformer: BLIP-2's Q-Former (the vision-language bridge), learned query tokens layer-
  normed, self-attention, cross-attention to the image encoder's states (another width), the
  query feed-forward, then the language projection to the LLM width.
- dinov3_vit: DINOv3's ViT, patch embedding, a class token and register tokens, 2-D rotary
  positions from patch centres (applied to the patch tokens only), LayerScale, a gated MLP,
  the final LayerNorm.
- pp_lcnet_blocks: PP-LCNet's (PaddleOCR's CPU backbone) depthwise-separable layers,
  5x5 depthwise convolutions (one with stride 2), BatchNorm, hardswish, squeeze-and-excitation
  with ReLU and hardsigmoid, 1x1 pointwise convolutions.
- moonshine_encoder: Moonshine's speech encoder on a raw waveform, the convolution stem
  (conv1d stride 64 with tanh, GroupNorm, two strided conv1d with GELU), one encoder layer with
  partial rotary, the final bias-free LayerNorm.
- conditional_detr_decoder: Conditional DETR's decoder (detection), two layers: reference
  points from the query positions (MLP, sigmoid), their sine embedding scaled by query_scale,
  self-attention, conditional cross-attention (content and spatial parts concatenated per
  head) over encoder states with a padding mask; then the class head and the box head
  (inverse sigmoid of the reference added, sigmoid), as ConditionalDetrForObjectDetection.
- maskformer_pixel_decoder: MaskFormer's segmentation head, the FPN pixel decoder (1x1 lateral
  convolutions with GroupNorm, nearest upsampling, 3x3 conv, GroupNorm, ReLU), the mask
  projection, then the class predictor and the mask embedder MLP with the einsum that makes
  the per-query mask logits, as MaskFormerForInstanceSegmentation.get_logits.
- patchtsmixer_forecast_loss: PatchTSMixer's forecaster (time series) and its MSE loss, the
  standard scaler (observed mean and std), patching with unfold, MLP-mixer layers over
  patches, features and channels with gated attention, the linear forecast head, rescaled.
- splinter_qass_loss: Splinter's question-aware span selection head and extractive-QA loss,
  the question token's representation gathered, four dense-GELU-LayerNorm transforms, start
  and end logits by matmul, the padding mask (finfo.min), cross-entropy with the ignored index
  (positions clamped), as SplinterForQuestionAnswering.

NOT_CAPTURED: none known when this was written.

The training step differentiates with `torch.func.grad` inside the compiled function, so that
forward and backward are one graph (the comparison compiles one graph per entry). Each entry:
a function of tensors and a maker of small CPU inputs. Do not change the scheduler's rules
while looking at these graphs: the figure is only honest while no rule was tuned against
them."""

import torch
from fidelity_heldout import _causal_mask, _eval, _first, _positions, _r
from fidelity_heldout4 import _normal_init
from fidelity_heldout5 import _with_bn_statistics
from fidelity_heldout6 import _decoder_train_step
from fidelity_heldout7 import _padding_inputs


def _decoder_layer(layer: torch.nn.Module, rope: torch.nn.Module, dtype=torch.float32):
    """A decoder layer under a causal mask on a (2, 8, 32) batch, rotary from position ids."""

    def decoder(x, position_ids):
        mask = _causal_mask(x.shape[1], x.dtype, x.device)
        return _first(layer(x, mask, position_ids=position_ids,
                            position_embeddings=rope(x, position_ids)))

    return decoder, lambda: (_r(2, 8, 32, dtype=dtype), _positions(2, 8))


def _diffllama_layer():
    from transformers import DiffLlamaConfig
    from transformers.models.diffllama.modeling_diffllama import (
        DiffLlamaDecoderLayer,
        DiffLlamaRotaryEmbedding,
    )

    cfg = DiffLlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                          intermediate_size=64, num_hidden_layers=2, vocab_size=64,
                          max_position_embeddings=16, lambda_std_dev=0.3, bos_token_id=None,
                          eos_token_id=None, pad_token_id=None, attn_implementation="eager")
    torch.manual_seed(0)
    layer = _eval(DiffLlamaDecoderLayer(cfg, 1))  # layer 1: lambda_init from its depth
    return _decoder_layer(layer, _eval(DiffLlamaRotaryEmbedding(cfg)))


def _bitnet_layer_bf16():
    from transformers import BitNetConfig
    from transformers.models.bitnet.modeling_bitnet import (
        BitNetDecoderLayer,
        BitNetRotaryEmbedding,
    )

    cfg = BitNetConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                       intermediate_size=64, num_hidden_layers=1, vocab_size=64,
                       max_position_embeddings=16, hidden_act="relu2", bos_token_id=None,
                       eos_token_id=None, pad_token_id=None, attn_implementation="eager")
    layer = _eval(_normal_init(BitNetDecoderLayer(cfg, 0))).to(torch.bfloat16)
    return _decoder_layer(layer, _eval(BitNetRotaryEmbedding(cfg)), torch.bfloat16)


def _apertus_layer():
    from transformers import ApertusConfig
    from transformers.models.apertus.modeling_apertus import (
        ApertusDecoderLayer,
        ApertusRotaryEmbedding,
    )

    cfg = ApertusConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                        intermediate_size=64, num_hidden_layers=1, vocab_size=64,
                        hidden_act="xielu", dtype=torch.float32,
                        bos_token_id=None, eos_token_id=None, pad_token_id=None,
                        attn_implementation="eager")
    torch.manual_seed(0)
    layer = ApertusDecoderLayer(cfg, 0)
    for name, p in layer.named_parameters():  # fresh RMSNorms are 1: seeded around 1
        if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
            torch.nn.init.normal_(p, mean=1.0, std=0.2)
    return _decoder_layer(_eval(layer), _eval(ApertusRotaryEmbedding(cfg)))


def _exaone4_layer_train_step():
    from transformers import Exaone4Config
    from transformers.models.exaone4.modeling_exaone4 import (
        Exaone4DecoderLayer,
        Exaone4RotaryEmbedding,
    )

    cfg = Exaone4Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                        intermediate_size=64, num_hidden_layers=1, vocab_size=64,
                        max_position_embeddings=16, sliding_window=16,
                        bos_token_id=None, eos_token_id=None, pad_token_id=None,
                        attn_implementation="eager")
    torch.manual_seed(0)
    layer = _eval(Exaone4DecoderLayer(cfg, 0))  # a local layer: rotary (global ones: NoPE)
    return _decoder_train_step(layer, _eval(Exaone4RotaryEmbedding(cfg)))


def _llama4_text_moe_bf16():
    from transformers import Llama4TextConfig
    from transformers.models.llama4.modeling_llama4 import Llama4TextMoe

    cfg = Llama4TextConfig(hidden_size=32, intermediate_size=32, num_local_experts=4,
                           num_experts_per_tok=1, num_hidden_layers=1, num_attention_heads=4,
                           num_key_value_heads=2, head_dim=8, vocab_size=64,
                           bos_token_id=None, eos_token_id=None, pad_token_id=None)
    moe = _eval(_normal_init(Llama4TextMoe(cfg))).to(torch.bfloat16)  # experts: torch.empty
    return (lambda x: moe(x)[0]), lambda: (_r(2, 8, 32, dtype=torch.bfloat16),)


def _qwen3_next_gated_deltanet():
    from transformers import Qwen3NextConfig
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet

    cfg = Qwen3NextConfig(hidden_size=32, num_hidden_layers=1, layer_types=["linear_attention"],
                          linear_num_key_heads=2, linear_num_value_heads=4,
                          linear_key_head_dim=8, linear_value_head_dim=8,
                          linear_conv_kernel_dim=4, num_attention_heads=4, num_key_value_heads=2,
                          head_dim=8, vocab_size=64, intermediate_size=64,
                          bos_token_id=None, eos_token_id=None, pad_token_id=None)
    torch.manual_seed(0)
    deltanet = Qwen3NextGatedDeltaNet(cfg, 0)
    torch.nn.init.normal_(deltanet.norm.weight, mean=1.0, std=0.2)  # fresh: ones
    deltanet = _eval(deltanet)
    # 24 tokens: padded to one chunk of 64 inside
    return (lambda x: deltanet(x)), lambda: (_r(2, 24, 32),)


def _funnel_encoder():
    from transformers import FunnelConfig
    from transformers.models.funnel.modeling_funnel import FunnelEncoder

    cfg = FunnelConfig(d_model=32, n_head=4, d_head=8, d_inner=64, block_sizes=[1, 1],
                       block_repeats=[1, 1], num_decoder_layers=1, vocab_size=64,
                       attention_type="relative_shift", separate_cls=True, truncate_seq=True,
                       pool_q_only=True, pooling_type="mean")
    encoder = _eval(_normal_init(FunnelEncoder(cfg)))

    def funnel(x, padding, token_type_ids):
        return _first(encoder(x, attention_mask=padding, token_type_ids=token_type_ids,
                              return_dict=False))

    def inputs():
        token_types = torch.zeros(2, 10, dtype=torch.long)
        token_types[:, 6:] = 1  # a second segment
        return _r(2, 10, 32), _padding_inputs(10, 3), token_types

    return funnel, inputs


def _blip2_qformer():
    from transformers import Blip2QFormerConfig
    from transformers.models.blip_2.modeling_blip_2 import Blip2QFormerModel

    cfg = Blip2QFormerConfig(hidden_size=32, num_attention_heads=4, intermediate_size=64,
                             num_hidden_layers=1, encoder_hidden_size=48,
                             cross_attention_frequency=1, vocab_size=64,
                             attn_implementation="eager")
    torch.manual_seed(0)
    qformer = _eval(Blip2QFormerModel(cfg))
    projection = _eval(torch.nn.Linear(32, 40))  # Blip2ForConditionalGeneration's to the LLM

    def blip2(query_tokens, image_embeds):
        image_mask = torch.ones(image_embeds.shape[:-1], dtype=torch.long,
                                device=image_embeds.device)
        out = qformer(query_embeds=query_tokens, encoder_hidden_states=image_embeds,
                      encoder_attention_mask=image_mask)
        return projection(out.last_hidden_state)

    # 8 query tokens, the vision tower's states: a class token and 4x4 patches, width 48
    return blip2, lambda: (_r(2, 8, 32), _r(2, 17, 48))


def _dinov3_vit():
    from transformers import DINOv3ViTConfig
    from transformers.models.dinov3_vit.modeling_dinov3_vit import DINOv3ViTModel

    cfg = DINOv3ViTConfig(hidden_size=32, num_attention_heads=4, intermediate_size=64,
                          num_hidden_layers=1, patch_size=8, image_size=32,
                          num_register_tokens=4, use_gated_mlp=True, layerscale_value=0.1,
                          attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(DINOv3ViTModel(cfg))
    return (lambda pixels: model(pixels).last_hidden_state), lambda: (_r(2, 3, 32, 32),)


def _pp_lcnet_blocks():
    from transformers import PPLCNetConfig
    from transformers.models.pp_lcnet.modeling_pp_lcnet import PPLCNetDepthwiseSeparableConvLayer

    cfg = PPLCNetConfig(hidden_act="hardswish", reduction=4)
    torch.manual_seed(0)
    blocks = torch.nn.Sequential(
        PPLCNetDepthwiseSeparableConvLayer(16, 32, stride=2, kernel_size=5,
                                           use_squeeze_excitation=True, config=cfg),
        PPLCNetDepthwiseSeparableConvLayer(32, 32, stride=1, kernel_size=5,
                                           use_squeeze_excitation=True, config=cfg))
    blocks = _eval(_with_bn_statistics(blocks))
    return (lambda x: blocks(x)), lambda: (_r(2, 16, 16, 16),)


def _moonshine_encoder():
    from transformers import MoonshineConfig
    from transformers.models.moonshine.modeling_moonshine import MoonshineEncoder

    cfg = MoonshineConfig(hidden_size=32, intermediate_size=64, encoder_num_hidden_layers=1,
                          decoder_num_hidden_layers=1, encoder_num_attention_heads=4,
                          decoder_num_attention_heads=4, vocab_size=64,
                          max_position_embeddings=64, partial_rotary_factor=0.5,
                          bos_token_id=None, eos_token_id=None, pad_token_id=None,
                          attn_implementation="eager")
    torch.manual_seed(0)
    encoder = _eval(MoonshineEncoder(cfg))
    # 3583 samples: 55 frames after the stride-64 convolution, 17, then 8 tokens
    return (lambda audio: encoder(audio).last_hidden_state), lambda: (_r(2, 3583),)


def _conditional_detr_decoder():
    from transformers import ConditionalDetrConfig
    from transformers.models.conditional_detr.modeling_conditional_detr import (
        ConditionalDetrDecoder,
        ConditionalDetrMLPPredictionHead,
        inverse_sigmoid,
    )

    cfg = ConditionalDetrConfig(d_model=32, decoder_layers=2, decoder_attention_heads=4,
                                decoder_ffn_dim=64, num_queries=10, num_labels=5,
                                use_timm_backbone=False, use_pretrained_backbone=False,
                                attn_implementation="eager")
    torch.manual_seed(0)
    decoder = _eval(ConditionalDetrDecoder(cfg))
    classifier = _eval(torch.nn.Linear(32, cfg.num_labels))
    box_head = _eval(ConditionalDetrMLPPredictionHead(32, 32, 4, 3))

    def conditional_detr(query_positions, encoder_states, spatial_positions, pixel_mask):
        # ConditionalDetrModel: the queries start at zero, the object queries are positions
        out = decoder(inputs_embeds=torch.zeros_like(query_positions),
                      encoder_hidden_states=encoder_states, encoder_attention_mask=pixel_mask,
                      spatial_position_embeddings=spatial_positions,
                      object_queries_position_embeddings=query_positions)
        hidden, reference = out.last_hidden_state, out.reference_points
        boxes = box_head(hidden)
        boxes[..., :2] += inverse_sigmoid(reference).transpose(0, 1)
        return classifier(hidden), boxes.sigmoid()

    def inputs():  # 10 queries; a 4x4 feature map, the second image's right column padded
        mask = torch.ones(2, 4, 4, dtype=torch.long)
        mask[1, :, 3] = 0
        return _r(2, 10, 32), _r(2, 16, 32), _r(2, 16, 32), mask.view(2, 16)

    return conditional_detr, inputs


def _maskformer_pixel_decoder():
    from transformers.models.maskformer.modeling_maskformer import (
        MaskformerMLPPredictionHead,
        MaskFormerPixelDecoder,
    )

    torch.manual_seed(0)
    # backbone stages of 16, 24, 32 and 48 channels at strides 4 .. 32 of a 64x64 image
    pixel_decoder = MaskFormerPixelDecoder(in_features=48, lateral_widths=[16, 24, 32],
                                           feature_size=32, mask_feature_size=32)
    for norm in pixel_decoder.modules():  # fresh GroupNorms: weight 1, bias 0
        if isinstance(norm, torch.nn.GroupNorm):
            torch.nn.init.normal_(norm.weight, mean=1.0, std=0.2)
            torch.nn.init.normal_(norm.bias, std=0.2)
    pixel_decoder = _eval(pixel_decoder)
    class_predictor = _eval(torch.nn.Linear(32, 6))  # num_labels + 1 ("no object")
    mask_embedder = _eval(MaskformerMLPPredictionHead(32, 32, 32))

    def maskformer(stage_1, stage_2, stage_3, stage_4, queries):
        pixels = pixel_decoder([stage_1, stage_2, stage_3, stage_4]).last_hidden_state
        masks = torch.einsum("bqc, bchw -> bqhw", mask_embedder(queries), pixels)
        return class_predictor(queries), masks

    return maskformer, lambda: (_r(2, 16, 16, 16), _r(2, 24, 8, 8), _r(2, 32, 4, 4),
                                _r(2, 48, 2, 2), _r(2, 10, 32))


def _patchtsmixer_forecast_loss():
    from transformers import PatchTSMixerConfig
    from transformers.models.patchtsmixer.modeling_patchtsmixer import PatchTSMixerForPrediction

    cfg = PatchTSMixerConfig(context_length=32, patch_length=8, patch_stride=8,
                             num_input_channels=3, d_model=16, expansion_factor=2, num_layers=2,
                             mode="mix_channel", gated_attn=True, self_attn=False,
                             prediction_length=8, scaling="std", loss="mse", dropout=0.0,
                             head_dropout=0.0, norm_mlp="LayerNorm")
    torch.manual_seed(0)
    model = _eval(PatchTSMixerForPrediction(cfg))

    def forecast(past_values, future_values):
        return model(past_values=past_values, future_values=future_values).loss

    return forecast, lambda: (_r(2, 32, 3), _r(2, 8, 3))


def _splinter_qass_loss():
    from transformers import SplinterConfig
    from transformers.models.splinter.modeling_splinter import QuestionAwareSpanSelectionHead

    torch.manual_seed(0)
    head = _eval(QuestionAwareSpanSelectionHead(SplinterConfig(hidden_size=32)))

    def splinter(hidden, question_positions, padding, start_positions, end_positions):
        # SplinterForQuestionAnswering.forward after the encoder, one question per example
        start_logits, end_logits = head(hidden, question_positions)
        start_logits, end_logits = start_logits.squeeze(1), end_logits.squeeze(1)
        start_logits = start_logits + (1 - padding) * torch.finfo(start_logits.dtype).min
        end_logits = end_logits + (1 - padding) * torch.finfo(end_logits.dtype).min
        ignored_index = start_logits.size(1)
        start_positions = start_positions.clamp(0, ignored_index)
        end_positions = end_positions.clamp(0, ignored_index)
        loss_fct = torch.nn.CrossEntropyLoss(ignore_index=ignored_index)
        return (loss_fct(start_logits, start_positions) + loss_fct(end_logits, end_positions)) / 2

    def inputs():  # the second answer's end lies past the input: clamped to the ignored index
        return (_r(2, 12, 32), torch.tensor([[2], [4]]), _padding_inputs(12, 3),
                torch.tensor([5, 7]), torch.tensor([6, 20]))

    return splinter, inputs


_BUILDERS = {
    "diffllama_layer": _diffllama_layer,
    "bitnet_layer_bf16": _bitnet_layer_bf16,
    "apertus_layer": _apertus_layer,
    "exaone4_layer_train_step": _exaone4_layer_train_step,
    "llama4_text_moe_bf16": _llama4_text_moe_bf16,
    "qwen3_next_gated_deltanet": _qwen3_next_gated_deltanet,
    "funnel_encoder": _funnel_encoder,
    "blip2_qformer": _blip2_qformer,
    "dinov3_vit": _dinov3_vit,
    "pp_lcnet_blocks": _pp_lcnet_blocks,
    "moonshine_encoder": _moonshine_encoder,
    "conditional_detr_decoder": _conditional_detr_decoder,
    "maskformer_pixel_decoder": _maskformer_pixel_decoder,
    "patchtsmixer_forecast_loss": _patchtsmixer_forecast_loss,
    "splinter_qass_loss": _splinter_qass_loss,
}

# Graphs whose audit fails for a reason in the comparison (none known when this was written).
NOT_ALIGNED: dict = {}

# Graphs Dynamo cannot capture, so that neither compiler is given them (none known).
NOT_CAPTURED: dict = {}

# Graphs our compiler or Inductor failed on (none known when this was written).
NOT_COMPILED: dict = {}


def heldout8_graphs() -> dict:
    """{name: (fn, make_inputs)}, modules built (with seeded weights) on first call."""
    torch.manual_seed(0)
    return {name: build() for name, build in _BUILDERS.items()}
