"""The TENTH HELD-OUT fidelity suite, written blind: its list of graphs was committed before any
comparison was run on it, by someone who was not tuning the scheduler, while others tuned on
the other suites, so that the figure it gives is that of graphs nobody tuned on.

Decoder layers, an MoE block, vision, detection, matting, speech, time-series and state-space
models, three training steps and an RL model, built from the module code of `transformers`
with tiny configs and seeded random weights, from fifteen families used in none of the other
suites (fidelity_graphs, fidelity_tuning_hf, fidelity_heldout .. fidelity_heldout9) nor in any
other test (torchvision and timm are not installed). Small shapes (batch 2, widths <= 64,
sequences <= 32, images <= 32x32, one or two layers), so that the whole suite compiles in well
under a minute and a half. Chosen for what real workloads contain, before anything was
measured:

- gemma2_layer_bf16: Gemma 2's decoder layer in bfloat16, a local (sliding-window) layer: the
  attention logits soft-capped (tanh), the query pre-attention scalar, four RMSNorms with
  (1 + weight), GELU-tanh gated MLP, grouped-query attention, rotary.
- qwen2_layer_bf16: Qwen2's (Qwen2.5) decoder layer in bfloat16: biases on the q, k and v
  projections (none on o), grouped-query attention, rotary, RMSNorms, SwiGLU.
- smollm3_layer_train_step: SmolLM3's decoder layer TRAINED one step: forward and backward
  (torch.func.grad of an MSE loss, every weight's gradient); grouped-query attention with
  rotary (a rotary layer of its NoPE/RoPE pattern), RMSNorms, SwiGLU.
- hunyuan_v1_moe_block: Hunyuan-A13B's MoE block: a float32 softmax router, top-2 of 8
  experts renormalised, transformers' "batched_mm" experts (gathered 3-D weights), the shared
  SwiGLU expert added.
- ast_tagging_train_step: the Audio Spectrogram Transformer's audio tagging TRAINED one step:
  forward and backward (torch.func.grad of a multi-label BCE-with-logits loss, every weight's
  gradient); overlapping 8x8 patches of a 32-frame, 16-bin spectrogram (a conv with strides
  of 4), class and distillation tokens, position embeddings, one layer, the mean of the two
  tokens, LayerNorm, the tag head. It replaces vit_mae_pretrain_step (below), which our
  compiler failed to compile in the comparison before any figure was printed.
- dinov3_convnext_features: DINOv3's ConvNeXt backbone (vision) on a 32x32 image: the 4x4
  patchify stem with a channels-first LayerNorm, a strided downsampling, ConvNeXt blocks
  (7x7 depthwise conv, LayerNorm, GELU MLP, layer scale), global average pooling joined to
  the patch tokens as a class token, the final LayerNorm.
- yolos_detection: YOLOS's detector (a ViT with detection tokens) on a 32x24 image: patch
  embedding, the position embeddings interpolated (bicubic) from the 32x32 training size,
  two layers, the class head and the box head MLP (sigmoid).
- vitmatte_matting: ViTMatte's image matting (segmentation) on a 32x32 RGB + trimap image: a
  ViTDet backbone (patches of 8, windowless, relative positions), the ConvStream (two strided
  3x3 convs, BatchNorm, ReLU), the fusion blocks (bilinear 2x upsampling, concatenation with
  the ConvStream's detail, conv, BatchNorm, ReLU) up to the input size, the matting head and
  the sigmoid alpha.
- speech_to_text_encoder: Speech2Text's (S2T) encoder on 32 frames of 16 filterbank features
  with a padding mask: the conv1d subsampler (two strided convs with GLU), the sinusoidal
  positions made from the padding mask (cumsum of the non-padding tokens), one pre-LN layer,
  the final LayerNorm, the subsampled mask.
- patchtst_forecast: PatchTST's forecaster (time series) and its MSE loss against the future:
  the mean/std scaler, patching with unfold, the patch projection and learned positions, an
  encoder layer with BatchNorm (its norm type), the flatten head, the forecast rescaled.
- falcon_mamba_block: Falcon-Mamba's block (state space), its PyTorch path: RMSNorm, the in
  projection, a causal depthwise conv1d with SiLU, the x projection split into dt, B and C,
  each RMS-normalised (Falcon-Mamba's departure from Mamba), softplus dt, the selective scan
  over 8 steps, the gate, the out projection, the residual.
- glm4_moe_layer_train_step: GLM-4.5's MoE decoder layer TRAINED one step: forward and
  backward (torch.func.grad of an MSE loss, every weight's gradient); attention with biases,
  QK-norm, partial rotary, grouped-query attention; the MoE: sigmoid router scores plus a
  correction bias, group-limited top-k (top-1 of 2 groups by the sum of their top-2, the
  group mask scattered and expanded, masked_fill, top-2 of 8), the weights gathered,
  renormalised and scaled, "batched_mm" experts, a shared expert. It replaces
  gpt_neo_lm_train_step (below), which our compiler failed to compile in the comparison
  before any figure was printed (as did distilbert_mlm_train_step, tried in its place).
- decision_transformer_uncached: the Decision Transformer (offline reinforcement learning):
  returns-to-go, states and actions embedded, timestep embeddings added, interleaved into one
  sequence of 3 x 8 tokens (stack, permute), a GPT-2 block under the padding mask, the
  state, action (tanh) and return predictions read from their token slots; its config's
  use_cache off. It replaces decision_transformer_actions (below, the same model with the
  default use_cache=True), on which the comparison crashed before any figure was printed.
- swin2sr_upscale: Swin2SR's super-resolution (x2) of a 16x16 image (a multiple of the window,
  so its reflect padding is empty: a 14x14 one fails in eager in this transformers, in the
  patch unembedding), the mean subtracted, a shallow conv, a residual Swin-V2 stage of two
  blocks (windows of 4, the second shifted with its mask, the cosine attention with a clamped
  logit scale, the continuous relative position bias MLP with 16 * sigmoid), the conv after
  the body, the pixel-shuffle upsampler, the crop.
- tapas_table_qa: TAPAS's table question answering head on a 16-token question+table: seven
  token-type embeddings (segment, column, row, ranks), one layer, then the cell selection
  logits (segmented mean over cells by scatter_reduce, a temperature), the column logits
  (segmented means over columns, the question tokens masked out) and the aggregation head.

NOT_CAPTURED: none known when this was written.

NOT_COMPILED, replaced after the first runs of the comparison crashed on them, before any
figure was printed (eager runs them, and Dynamo captures each in one graph). Three training
steps on which our compiler, `torch.compile(fn, backend="mtia_lab")` alone, fails:

- vit_mae_pretrain_step: ViT-MAE's masked-autoencoder pretraining TRAINED one step: forward and
  backward (torch.func.grad of its loss, every weight's gradient); the random masking by
  argsort of given noise (gather of the kept 25% of patches, the inverse argsort, the mask
  gathered back), a one-layer encoder, the decoder's mask tokens gathered into place, fixed
  2-D sin-cos positions, the per-patch normalised pixel loss averaged over masked patches.
- gpt_neo_lm_train_step: GPT-Neo's causal language model TRAINED one step: forward and
  backward (torch.func.grad of the shifted cross-entropy, every weight's gradient); token and
  position embeddings, a global then a local (windowed) attention layer without the 1/sqrt(d)
  scale, the tied LM head.
- distilbert_mlm_train_step: DistilBERT's masked language model TRAINED one step: forward and
  backward (torch.func.grad of its cross-entropy over the masked tokens, -100 ignored, every
  weight's gradient); embeddings, two post-LN layers under a padding mask, the vocab
  transform and projector. Tried in place of gpt_neo_lm_train_step, before any comparison;
  our compiler fails on it for the same reason.

All three build a tensor with `device=` inside the function that `torch.func.grad`
differentiates (MAE's `torch.ones(..., device=sequence.device)` mask, GPT-Neo's and
DistilBERT's masks and positions). mtia_lab/compiler/factories.py makes such a factory on the
host then `on_device`; while AOTAutograd traces the graph (collecting its metadata), the
tensor `on_device` gets is functorch's TensorWrapper of grad's level, whose
`untyped_storage()` raises NotImplementedError ("Cannot access storage of TensorWrapper"), so
backend/aten/tensor.py `wrap` takes it for a sparse tensor and sparse.py `wrap_sparse`
refuses its strided layout: "BackendCompilerFailed: backend='mtia_lab' raised:
NotImplementedError: compiled factory returns a torch.strided tensor, and mtia_sim stores
strided (dense) tensors and sparse COO tensors only." A factory outside the grad, or a factory
in a forward graph, compiles. Repro (eight lines):

    import torch, mtia_lab
    def step(x):
        def loss(w):
            mask = torch.ones(2, 16, device=x.device)
            return ((x * w).sum(-1) * mask).sum()
        return torch.func.grad(loss)(torch.ones(8, device=x.device))
    x = torch.randn(2, 16, 8).to("mtia_sim")
    torch.compile(step, backend="mtia_lab")(x)  # fails; step(x) runs

or `fidelity_rows({"vit_mae_pretrain_step": _vit_mae_pretrain_step()})`.

And one graph our compiler compiles, on which the comparison's compile of our aten graph by
Inductor fails (the second run of the comparison crashed on it):

- decision_transformer_actions: the Decision Transformer as above with its config's default,
  use_cache=True: its GPT-2 encoder makes a DynamicCache inside the graph, whose layer starts
  its keys and values as `torch.tensor([], device=...)` and concatenates the step's onto them.
  Our compiler compiles it (the empty tensors are host tensor constants of our aten graph,
  `_tensor_constant0` and 1, shape (0,), lift_fresh_copy then cat); `device_plan`
  (mtia_lab/compare/plans.py) moves them to mtia_sim in its copy (`_constant_to`), and
  Dynamo's trace of that copy for Inductor fails on the empty one: "torch._dynamo.exc.
  Unsupported: Failed to convert args/kwargs to proxy ... GetAttrVariable(
  UnspecializedNNModuleVariable(GraphModule), _tensor_constant0)" at its lift_fresh_copy (a
  non-empty constant there goes through). Repro (the comparison of a four-line function):

      def cached(x):  # transformers' DynamicLayer
          keys = torch.tensor([], dtype=x.dtype, device=x.device)
          return torch.cat([keys, x], dim=-2) * 2
      fidelity_rows({"cached": (cached, lambda: (torch.randn(2, 4, 8),))})  # fails

  or `fidelity_rows({"decision_transformer_actions": _decision_transformer_actions()})`.

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
from fidelity_heldout8 import _decoder_layer
from fidelity_heldout9 import _NO_SPECIAL_TOKENS, _seeded_norms


def _grad_of(model: torch.nn.Module, loss_of_outputs):
    """A training step as one function: the gradient of `loss_of_outputs(model(*args))` for
    every weight (torch.func.grad inside the compiled function), args and kwargs passed on."""
    params = dict(model.named_parameters())

    def train_step(*args, **kwargs):
        def loss(weights):
            return loss_of_outputs(torch.func.functional_call(model, weights, args, kwargs))

        return torch.func.grad(loss)(params)

    return train_step


def _gemma2_layer_bf16():
    from transformers import Gemma2Config
    from transformers.models.gemma2.modeling_gemma2 import (
        Gemma2DecoderLayer,
        Gemma2RotaryEmbedding,
    )

    cfg = Gemma2Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                       head_dim=8, intermediate_size=64, num_hidden_layers=2, vocab_size=64,
                       max_position_embeddings=16, sliding_window=4, query_pre_attn_scalar=8,
                       attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                       layer_types=["sliding_attention", "full_attention"],
                       attn_implementation="eager", **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_seeded_norms(Gemma2DecoderLayer(cfg, 0), 0.0)).to(torch.bfloat16)
    rope = _eval(Gemma2RotaryEmbedding(cfg))

    def gemma2(x, position_ids):
        # the sliding-window mask (window 4) Gemma 2's mask utilities build for a local layer
        length = x.shape[1]
        rows = torch.arange(length, device=x.device)
        keep = (rows[None, :] <= rows[:, None]) & (rows[:, None] - rows[None, :] < 4)
        mask = torch.where(keep, 0.0, torch.finfo(x.dtype).min).to(x.dtype)[None, None]
        return _first(layer(x, rope(x, position_ids), mask, position_ids=position_ids))

    return gemma2, lambda: (_r(2, 8, 32, dtype=torch.bfloat16), _positions(2, 8))


def _qwen2_layer_bf16():
    from transformers import Qwen2Config
    from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer, Qwen2RotaryEmbedding

    cfg = Qwen2Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                      intermediate_size=64, num_hidden_layers=1, vocab_size=64,
                      max_position_embeddings=16, attn_implementation="eager",
                      **_NO_SPECIAL_TOKENS)
    layer = _eval(_normal_init(Qwen2DecoderLayer(cfg, 0))).to(torch.bfloat16)
    return _decoder_layer(layer, _eval(Qwen2RotaryEmbedding(cfg)), torch.bfloat16)


def _smollm3_layer_train_step():
    from transformers import SmolLM3Config
    from transformers.models.smollm3.modeling_smollm3 import (
        SmolLM3DecoderLayer,
        SmolLM3RotaryEmbedding,
    )

    cfg = SmolLM3Config(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                        intermediate_size=64, num_hidden_layers=4, vocab_size=64,
                        max_position_embeddings=16, attn_implementation="eager",
                        **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    layer = _eval(_seeded_norms(SmolLM3DecoderLayer(cfg, 0), 1.0))  # layer 0 uses rotary
    return _decoder_train_step(layer, _eval(SmolLM3RotaryEmbedding(cfg)))


def _hunyuan_v1_moe_block():
    from transformers import HunYuanMoEV1Config
    from transformers.models.hunyuan_v1_moe.modeling_hunyuan_v1_moe import HunYuanMoEV1Moe

    cfg = HunYuanMoEV1Config(hidden_size=32, intermediate_size=16, num_experts=8, moe_topk=2,
                             num_hidden_layers=1, num_attention_heads=4, vocab_size=64,
                             experts_implementation="batched_mm", **_NO_SPECIAL_TOKENS)
    block = _eval(_normal_init(HunYuanMoEV1Moe(cfg, layer_idx=0)))
    return (lambda x: block(x)), lambda: (_r(2, 8, 32),)


def _vit_mae_pretrain_step():  # NOT_COMPILED (see the docstring), kept for the record
    from transformers import ViTMAEConfig
    from transformers.models.vit_mae.modeling_vit_mae import ViTMAEForPreTraining

    cfg = ViTMAEConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                       intermediate_size=64, image_size=16, patch_size=4, num_channels=3,
                       decoder_hidden_size=32, decoder_num_hidden_layers=1,
                       decoder_num_attention_heads=4, decoder_intermediate_size=64,
                       mask_ratio=0.75, norm_pix_loss=True, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(ViTMAEForPreTraining(cfg))
    step = _grad_of(model, lambda out: out.loss)
    # the noise that orders the 16 patches (MAE draws it per step; given here, as its tests do)
    return step, lambda: (_r(2, 3, 16, 16), torch.rand(2, 16))


def _dinov3_convnext_features():
    from transformers import DINOv3ConvNextConfig
    from transformers.models.dinov3_convnext.modeling_dinov3_convnext import DINOv3ConvNextModel

    cfg = DINOv3ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 2], image_size=32,
                               layer_scale_init_value=0.1)
    torch.manual_seed(0)
    model = DINOv3ConvNextModel(cfg)
    for name, p in model.named_parameters():  # LayerNorms seeded around 1 and 0
        if "norm" in name:
            torch.nn.init.normal_(p, mean=1.0 if name.endswith("weight") else 0.0, std=0.2)
    model = _eval(model)

    def dinov3_convnext(pixels):
        out = model(pixel_values=pixels)
        return out.last_hidden_state, out.pooler_output

    return dinov3_convnext, lambda: (_r(2, 3, 32, 32),)


def _yolos_detection():
    from transformers import YolosConfig
    from transformers.models.yolos.modeling_yolos import YolosForObjectDetection

    cfg = YolosConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=64, image_size=[32, 32], patch_size=8,
                      num_detection_tokens=5, num_labels=4, use_mid_position_embeddings=False,
                      attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(YolosForObjectDetection(cfg))
    torch.manual_seed(0)
    with torch.no_grad():  # fresh position embeddings are zeros: seeded
        model.vit.embeddings.position_embeddings.normal_(std=0.2)

    def yolos(pixels):
        out = model(pixel_values=pixels)
        return out.logits, out.pred_boxes

    return yolos, lambda: (_r(2, 3, 32, 24),)


def _vitmatte_matting():
    from transformers import VitDetConfig, VitMatteConfig
    from transformers.models.vitmatte.modeling_vitmatte import VitMatteForImageMatting

    backbone = VitDetConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            mlp_ratio=2, image_size=32, pretrain_image_size=32, patch_size=8,
                            num_channels=4, use_relative_position_embeddings=True,
                            out_features=["stage2"])
    cfg = VitMatteConfig(backbone_config=backbone, hidden_size=32,
                         convstream_hidden_sizes=[8, 16], fusion_hidden_sizes=[32, 16, 8])
    torch.manual_seed(0)
    model = VitMatteForImageMatting(cfg)
    torch.manual_seed(0)
    for name, p in model.named_parameters():  # relative positions: zeros when fresh
        if "rel_pos" in name:
            torch.nn.init.normal_(p, std=0.2)
    model = _eval(_with_bn_statistics(model))
    return (lambda pixels: model(pixel_values=pixels).alphas), lambda: (_r(2, 4, 32, 32),)


def _speech_to_text_encoder():
    from transformers import Speech2TextConfig
    from transformers.models.speech_to_text.modeling_speech_to_text import Speech2TextEncoder

    cfg = Speech2TextConfig(d_model=32, encoder_layers=1, encoder_attention_heads=4,
                            encoder_ffn_dim=64, input_feat_per_channel=16, input_channels=1,
                            num_conv_layers=2, conv_channels=32, conv_kernel_sizes=[5, 5],
                            max_source_positions=64, vocab_size=64, dropout=0.0,
                            attn_implementation="eager")
    torch.manual_seed(0)
    encoder = _eval(Speech2TextEncoder(cfg))

    def speech_to_text(features, padding):
        return encoder(input_features=features, attention_mask=padding).last_hidden_state

    # 32 frames of 16 features (8 after subsampling), the second 12 frames shorter
    return speech_to_text, lambda: (_r(2, 32, 16), _padding_inputs(32, 12))


def _patchtst_forecast():
    from transformers import PatchTSTConfig
    from transformers.models.patchtst.modeling_patchtst import PatchTSTForPrediction

    cfg = PatchTSTConfig(num_input_channels=3, context_length=32, patch_length=8,
                         patch_stride=8, prediction_length=8, d_model=32,
                         num_attention_heads=4, num_hidden_layers=1, ffn_dim=64,
                         norm_type="batchnorm", scaling="std", do_mask_input=False,
                         share_embedding=True, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(_with_bn_statistics(PatchTSTForPrediction(cfg), torch.nn.BatchNorm1d))

    def patchtst(past_values, future_values):
        out = model(past_values=past_values, future_values=future_values)
        return out.prediction_outputs, out.loss

    return patchtst, lambda: (_r(2, 32, 3), _r(2, 8, 3))


def _falcon_mamba_block():
    from transformers import FalconMambaConfig
    from transformers.models.falcon_mamba.modeling_falcon_mamba import FalconMambaBlock

    cfg = FalconMambaConfig(hidden_size=32, state_size=8, expand=2, conv_kernel=4,
                            time_step_rank=4, num_hidden_layers=1, vocab_size=64,
                            use_mambapy=False, **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    block = FalconMambaBlock(cfg, 0)
    # The block builds its mixer with initialize_mixer_weights=False: A_log and D stay
    # torch.empty (uninitialized host memory: values up to 1e38, inf or NaN, different in every
    # process) until FalconMambaPreTrainedModel._init_weights, which a standalone block never
    # runs. The mixer's own S4D initialization, as _init_weights calls it, makes them defined.
    block.mixer.init_falcon_mamba_weights()
    block = _eval(_seeded_norms(block, 1.0))
    return (lambda x: block(x)), lambda: (_r(2, 8, 32),)


def _gpt_neo_lm_train_step():  # NOT_COMPILED (see the docstring), kept for the record
    from transformers import GPTNeoConfig
    from transformers.models.gpt_neo.modeling_gpt_neo import GPTNeoForCausalLM

    cfg = GPTNeoConfig(vocab_size=64, max_position_embeddings=32, hidden_size=32,
                       num_layers=2, attention_types=[[["global", "local"], 1]], num_heads=4,
                       intermediate_size=64, window_size=4, embed_dropout=0.0,
                       attention_dropout=0.0, resid_dropout=0.0, attn_implementation="eager",
                       **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    model = _eval(GPTNeoForCausalLM(cfg))
    step = _grad_of(model, lambda out: out.loss)

    def gpt_neo(input_ids, labels):
        return step(input_ids=input_ids, labels=labels)

    def inputs():
        ids = torch.randint(0, 64, (2, 16))
        return ids, ids.clone()

    return gpt_neo, inputs


def _decision_transformer_actions(use_cache: bool = True):  # NOT_COMPILED with the cache
    from transformers import DecisionTransformerConfig
    from transformers.models.decision_transformer.modeling_decision_transformer import (
        DecisionTransformerModel,
    )

    cfg = DecisionTransformerConfig(state_dim=6, act_dim=3, hidden_size=32, max_ep_len=64,
                                    n_layer=1, n_head=4, n_inner=64, n_positions=64,
                                    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                    use_cache=use_cache, attn_implementation="eager",
                                    **_NO_SPECIAL_TOKENS)
    torch.manual_seed(0)
    model = _eval(DecisionTransformerModel(cfg))

    def decision_transformer(states, actions, returns_to_go, timesteps, padding):
        out = model(states=states, actions=actions, returns_to_go=returns_to_go,
                    timesteps=timesteps, attention_mask=padding)
        return out.state_preds, out.action_preds, out.return_preds

    def inputs():  # 8 steps; the second episode's first 3 are left padding
        padding = torch.ones(2, 8, dtype=torch.long)
        padding[1, :3] = 0
        timesteps = torch.stack([torch.arange(10, 18), torch.arange(-3, 5).clamp(min=0)])
        return _r(2, 8, 6), _r(2, 8, 3), _r(2, 8, 1), timesteps, padding

    return decision_transformer, inputs


def _decision_transformer_uncached():
    return _decision_transformer_actions(use_cache=False)


def _swin2sr_upscale():
    from transformers import Swin2SRConfig
    from transformers.models.swin2sr.modeling_swin2sr import Swin2SRForImageSuperResolution

    cfg = Swin2SRConfig(image_size=16, patch_size=1, num_channels=3, embed_dim=16,
                        depths=[2], num_heads=[2], window_size=4, mlp_ratio=2.0, upscale=2,
                        upsampler="pixelshuffle", img_range=1.0)
    torch.manual_seed(0)
    model = _eval(Swin2SRForImageSuperResolution(cfg))
    return (lambda pixels: model(pixel_values=pixels).reconstruction), \
        lambda: (torch.rand(2, 3, 16, 16),)


def _tapas_table_qa():
    from transformers import TapasConfig
    from transformers.models.tapas.modeling_tapas import TapasForQuestionAnswering

    cfg = TapasConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                      intermediate_size=64, vocab_size=64, max_position_embeddings=32,
                      type_vocab_sizes=[3, 8, 8, 2, 8, 8, 10], num_aggregation_labels=4,
                      select_one_column=True, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(TapasForQuestionAnswering(cfg))

    def tapas(input_ids, padding, token_types):
        out = model(input_ids=input_ids, attention_mask=padding, token_type_ids=token_types)
        return out.logits, out.logits_aggregation

    def inputs():
        # 4 question tokens, then a 3-column x 4-row table of 12 cells, one token each; the
        # second example's table has 3 rows (its last 3 tokens padding)
        types = torch.zeros(2, 16, 7, dtype=torch.long)
        types[:, 4:, 0] = 1  # segment: table
        cells = torch.arange(12)
        types[:, 4:, 1] = cells % 3 + 1  # column ids
        types[:, 4:, 2] = cells // 3 + 1  # row ids
        types[:, 4:, 4] = torch.randint(0, 4, (2, 12))  # column ranks
        padding = _padding_inputs(16, 3)
        types = types * padding[..., None]
        return torch.randint(1, 64, (2, 16)) * padding, padding, types

    return tapas, inputs


def _ast_tagging_train_step():
    from transformers import ASTConfig
    from transformers.models.audio_spectrogram_transformer.modeling_audio_spectrogram_transformer import (  # noqa: E501
        ASTForAudioClassification,
    )

    cfg = ASTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                    intermediate_size=64, patch_size=8, frequency_stride=4, time_stride=4,
                    max_length=32, num_mel_bins=16, num_labels=6,
                    attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(ASTForAudioClassification(cfg))

    def tagging_loss(out, labels):
        return torch.nn.functional.binary_cross_entropy_with_logits(out.logits, labels)

    params = dict(model.named_parameters())

    def ast_step(spectrogram, labels):
        def loss(weights):
            out = torch.func.functional_call(model, weights, (spectrogram,))
            return tagging_loss(out, labels)

        return torch.func.grad(loss)(params)

    # 32 frames of 16 mel bins, six tags (multi-label: several may be on)
    return ast_step, lambda: (_r(2, 32, 16), (torch.rand(2, 6) > 0.5).float())


def _distilbert_mlm_train_step():  # NOT_COMPILED (see the docstring), kept for the record
    from transformers import DistilBertConfig
    from transformers.models.distilbert.modeling_distilbert import DistilBertForMaskedLM

    cfg = DistilBertConfig(vocab_size=64, max_position_embeddings=32, dim=32, n_layers=2,
                           n_heads=4, hidden_dim=64, dropout=0.0, attention_dropout=0.0,
                           pad_token_id=0, attn_implementation="eager")
    torch.manual_seed(0)
    model = _eval(DistilBertForMaskedLM(cfg))
    step = _grad_of(model, lambda out: out.loss)

    def distilbert(input_ids, padding, labels):
        return step(input_ids=input_ids, attention_mask=padding, labels=labels)

    def inputs():  # 16 tokens, the second 4 shorter; 4 tokens masked, the rest ignored (-100)
        padding = _padding_inputs(16, 4)
        ids = torch.randint(1, 64, (2, 16)) * padding
        labels = torch.full((2, 16), -100)
        labels[:, [1, 5, 8, 10]] = ids[:, [1, 5, 8, 10]]
        return ids.masked_fill(labels != -100, 3), padding, labels

    return distilbert, inputs


def _glm4_moe_layer_train_step():
    from transformers import Glm4MoeConfig
    from transformers.models.glm4_moe.modeling_glm4_moe import (
        Glm4MoeDecoderLayer,
        Glm4MoeRotaryEmbedding,
    )

    cfg = Glm4MoeConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                        head_dim=8, intermediate_size=64, moe_intermediate_size=16,
                        num_hidden_layers=1, vocab_size=64, max_position_embeddings=16,
                        n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1,
                        n_group=2, topk_group=1, first_k_dense_replace=0,
                        routed_scaling_factor=2.5, attention_bias=True, use_qk_norm=True,
                        experts_implementation="batched_mm", attn_implementation="eager",
                        **_NO_SPECIAL_TOKENS)
    layer = Glm4MoeDecoderLayer(cfg, 0)
    _normal_init(layer)
    for name, p in layer.named_parameters():  # norms around 1
        if "norm" in name:
            torch.nn.init.normal_(p, mean=1.0, std=0.2)
    layer = _eval(layer)
    return _decoder_train_step(layer, _eval(Glm4MoeRotaryEmbedding(cfg)))


_BUILDERS = {
    "gemma2_layer_bf16": _gemma2_layer_bf16,
    "qwen2_layer_bf16": _qwen2_layer_bf16,
    "smollm3_layer_train_step": _smollm3_layer_train_step,
    "hunyuan_v1_moe_block": _hunyuan_v1_moe_block,
    "ast_tagging_train_step": _ast_tagging_train_step,
    "dinov3_convnext_features": _dinov3_convnext_features,
    "yolos_detection": _yolos_detection,
    "vitmatte_matting": _vitmatte_matting,
    "speech_to_text_encoder": _speech_to_text_encoder,
    "patchtst_forecast": _patchtst_forecast,
    "falcon_mamba_block": _falcon_mamba_block,
    "glm4_moe_layer_train_step": _glm4_moe_layer_train_step,
    "decision_transformer_uncached": _decision_transformer_uncached,
    "swin2sr_upscale": _swin2sr_upscale,
    "tapas_table_qa": _tapas_table_qa,
}

# Graphs Dynamo cannot capture, so that neither compiler is given them (none known).
NOT_CAPTURED: dict = {}

_FACTORY_UNDER_GRAD = (
    "our compiler fails (BackendCompilerFailed, NotImplementedError 'compiled factory returns a "
    "torch.strided tensor'): a factory with device= inside torch.func.grad (the model's own mask "
    "or position tensors) reaches factories.on_device, whose device_tensor.wrap takes functorch's "
    "TensorWrapper (no untyped_storage) for a sparse tensor. Fixed since (74991dc: each "
    "compiles and matches eager); left out of this suite, which was measured without it")

# Graphs our compiler or the comparison failed on when the suite was written (see the module
# docstring), kept for the record: replaced before any figure of theirs was seen.
NOT_COMPILED = {"vit_mae_pretrain_step": _FACTORY_UNDER_GRAD,
                "gpt_neo_lm_train_step": _FACTORY_UNDER_GRAD,
                "distilbert_mlm_train_step": _FACTORY_UNDER_GRAD,
                "decision_transformer_actions": (
    "device_plan's copy of our aten graph for Inductor: an empty host tensor constant (the "
    "DynamicCache layer's torch.tensor([]) keys, lift_fresh_copy then cat) moved to mtia_sim "
    "by _constant_to, and Dynamo fails to trace it: 'Failed to convert args/kwargs to proxy'. "
    "Fixed since (17351bd); left out of this suite, which was measured without it")}


def heldout10_graphs() -> dict:
    """{name: (fn, make_inputs)}, modules built (with seeded weights) on first call."""
    torch.manual_seed(0)
    return {name: build() for name, build in _BUILDERS.items()}
