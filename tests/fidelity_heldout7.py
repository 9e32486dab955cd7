"""The SEVENTH HELD-OUT fidelity suite, written blind: its list of graphs was committed before any
comparison was run on it, by someone who was not tuning the scheduler, while two engineers tuned
on the other suites, so that the figure it gives is that of graphs nobody tuned on.

Blocks, heads, losses and one training step of real models built from the module code of
`transformers` with tiny configs and seeded random weights, from families used in none of the
other suites (fidelity_graphs, fidelity_tuning_hf, fidelity_heldout .. fidelity_heldout6).
Small shapes, so that the whole suite compares in under a minute. Chosen for what real
workloads contain, before anything was measured:

- olmo_layer_bf16: OLMo's (v1) decoder layer in bfloat16, non-parametric LayerNorms (no
  weight, no bias), queries, keys and values clamped (clip_qkv), rotary, SwiGLU MLP.
- glm4_layer: GLM-4's decoder layer, "sandwich" RMSNorms (after attention and after the MLP
  as well as before), partial interleaved rotary, grouped-query attention with biased
  projections, a fused gate_up projection split by chunk.
- mpt_block: MPT's block, ALiBi (a per-head linear position bias added to the scores, built
  as MptModel builds it), fused Wqkv, bias-free LayerNorms, a GELU MLP.
- granite_layer_train_step: Granite's (dense) decoder layer TRAINED one step: forward and
  backward (torch.func.grad of an MSE loss against a target, the gradient of every weight
  returned), the attention multiplier instead of 1/sqrt(d), residual multipliers, SwiGLU.
- mobilebert_layer: MobileBERT's layer, the bottleneck in and out (linear down to the
  intra-block width), NoNorm (an elementwise affine, no statistics), four stacked
  feed-forward networks, a padding mask.
- vitdet_layer: ViTDet's (plain-ViT detection backbone) layer, window attention on a padded
  token map (pad, window partition, unpartition, crop), decomposed relative position bias
  (interpolated tables, einsums on height and width), GELU MLP.
- timesformer_layer: TimeSformer's divided space-time layer (video), temporal attention over
  frames, a temporal dense layer, spatial attention over patches with the class token
  repeated per frame and averaged back, MLP.
- rt_detr_csp_rep_layer: RT-DETR's hybrid-encoder CSP layer, two 1x1 conv branches, RepVGG
  blocks (a 3x3 and a 1x1 convolution each with BatchNorm, summed, SiLU), their sum.
- encodec_resnet_block: EnCodec's SEANet residual block (audio codec), ELU, dilated conv1d
  with the asymmetric "same" padding computed from the shape, a 1x1 conv1d, a 1x1 shortcut.
- sew_encoder: SEW's squeezed encoder, the positional convolution with stride (squeeze),
  average pooling of the sequence, one post-LN encoder layer, the upsampling linear that
  unsqueezes back to the input length (pad to length).
- gpt_oss_moe: GPT-OSS's MoE MLP, the router's top-k then softmax over the chosen, experts
  as 3-D weights with interleaved gate/up, clamped SwiGLU with alpha and a +1 on up.
- xlstm_block: xLSTM's mLSTM block (recurrent), the native chunkwise mLSTM kernel (matrix
  memory, exponential input gate with a log-sigmoid forget gate, stabiliser max), soft-capped
  gates, a multi-head RMSNorm, output gate, SwiGLU feed-forward.
- clipseg_decoder: CLIPSeg's segmentation decoder head, FiLM conditioning of the activations
  by the text embedding (a multiply and an add from linears), reduction linears, a
  transformer layer, transposed convolutions up to the mask.
- rt_detr_vfl_box_loss: RT-DETR's varifocal classification loss and box losses after matching
  (the matches given as indices): IoU of the matched boxes as the soft target, the varifocal
  weight (alpha * p^gamma on negatives), binary cross-entropy with logits, L1 and generalised
  IoU on centre-format boxes.

The training step differentiates with `torch.func.grad` inside the compiled function, so that
forward and backward are one graph (the comparison compiles one graph per entry). Each entry:
a function of tensors and a maker of small CPU inputs. Do not change the scheduler's rules
while looking at these graphs: the figure is only honest while no rule was tuned against
them."""
