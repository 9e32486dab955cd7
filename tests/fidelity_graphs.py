"""Seven held-out graph families for the scheduler-fidelity suite, written for it (none of
them tuned the scheduler): each a function and a maker of small inputs, CPU tensors."""

import torch
import torch.nn.functional as F


def _r(*shape):
    return torch.randn(*shape)


def mixer_block(x, ln1w, ln1b, t1w, t1b, t2w, t2b, ln2w, ln2b, c1w, c1b, c2w, c2b):
    """MLP-Mixer: a token-mixing MLP across patches, then a channel-mixing MLP."""
    y = F.layer_norm(x, (x.shape[-1],), ln1w, ln1b).transpose(1, 2)
    y = F.linear(F.gelu(F.linear(y, t1w, t1b)), t2w, t2b).transpose(1, 2)
    x = x + y
    y = F.layer_norm(x, (x.shape[-1],), ln2w, ln2b)
    return x + F.linear(F.gelu(F.linear(y, c1w, c1b)), c2w, c2b)


def depthwise_conv_bn(x, w, running_mean, running_var, gamma, beta):
    """Depthwise 3x3 convolution, BatchNorm in training mode (batch statistics), ReLU."""
    y = F.conv2d(x, w, padding=1, groups=x.shape[1])
    y = F.batch_norm(y, running_mean, running_var, gamma, beta, training=True)
    return F.relu(y)


def rmsnorm_swiglu(x, g, w_gate, w_up, w_down):
    """RMSNorm, then a SwiGLU feed-forward with a residual."""
    h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * g
    return x + (F.silu(h @ w_gate) * (h @ w_up)) @ w_down


def causal_attention(x, w_qkv, w_out):
    """Four-head self-attention with a causal mask built on the device."""
    batch, seq, dim = x.shape
    q, k, v = (x @ w_qkv).split(dim, -1)
    q, k, v = (t.view(batch, seq, 4, dim // 4).transpose(1, 2) for t in (q, k, v))
    scores = (q @ k.transpose(-2, -1)) * (dim // 4) ** -0.5
    mask = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    y = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(batch, seq, dim)
    return y @ w_out


def layernorm_chain(x, w1, b1, w2, b2, w3, b3):
    """Three LayerNorms chained through residual adds (the keep-list: one kernel each)."""
    h = F.layer_norm(x, (x.shape[-1],), w1, b1)
    h = F.layer_norm(x + h, (x.shape[-1],), w2, b2)
    return F.layer_norm(x + h * 0.5, (x.shape[-1],), w3, b3).relu()


def embedding_recommender(user_ids, item_ids, dense, user_table, item_table, w1, b1, w2, b2):
    """Pooled embedding lookups (sum and mean) joined with dense features, a small MLP."""
    users = F.embedding(user_ids, user_table).sum(1)
    items = F.embedding(item_ids, item_table).mean(1)
    h = torch.cat([users, items, dense], -1)
    h = F.relu(F.linear(h, w1, b1))
    return torch.sigmoid(F.linear(h, w2, b2))


def linear_cross_entropy(x, w, b, target):
    """A classifier head and its loss: the log-softmax, the gather, the mean over the batch."""
    return F.cross_entropy(F.linear(x, w, b), target)


GRAPHS = {
    "mlp_mixer": (mixer_block, lambda: (
        _r(2, 16, 32), _r(32), _r(32), _r(64, 16), _r(64), _r(16, 64), _r(16), _r(32), _r(32),
        _r(128, 32), _r(128), _r(32, 128), _r(32))),
    "depthwise_conv_bn": (depthwise_conv_bn, lambda: (
        _r(2, 8, 12, 12), _r(8, 1, 3, 3), torch.zeros(8), torch.ones(8), _r(8), _r(8))),
    "rmsnorm_swiglu": (rmsnorm_swiglu, lambda: (
        _r(16, 64), _r(64), _r(64, 128), _r(64, 128), _r(128, 64))),
    "causal_attention": (causal_attention, lambda: (_r(2, 16, 32), _r(32, 96), _r(32, 32))),
    "layernorm_chain": (layernorm_chain, lambda: (
        _r(16, 64), _r(64), _r(64), _r(64), _r(64), _r(64), _r(64))),
    "embedding_recommender": (embedding_recommender, lambda: (
        torch.randint(0, 100, (8, 5)), torch.randint(0, 50, (8, 3)), _r(8, 16), _r(100, 16),
        _r(50, 16), _r(32, 48), _r(32), _r(1, 32), _r(1))),
    "linear_cross_entropy": (linear_cross_entropy, lambda: (
        _r(16, 32), _r(100, 32), _r(100), torch.randint(0, 100, (16,)))),
}
# Inductor config for the reference side of one graph, and why (none needed: every graph is
# compiled with Inductor's defaults, its layout optimization included).
INDUCTOR_CONFIG: dict = {}


# ---- the TUNING suite's new families: real model code, rewritten as functions of tensors ----
# (diffusers' ResnetBlock2D, GPT-NeoX rotary attention, Switch/Mixtral routing, torch.nn.GRUCell's
# equations unrolled, label-smoothing and NT-Xent losses, nucleus sampling, torch.optim.Adam's
# update written out, a bf16 transformer MLP, DLRM's dot interaction, RoBERTa position ids,
# Inception-style concatenation)

def diffusion_resblock(x, temb, n1w, n1b, c1w, c1b, tw, tb, n2w, n2b, c2w, c2b):
    """diffusers ResnetBlock2D: GroupNorm, SiLU, conv, time embedding, GroupNorm, SiLU, conv."""
    h = F.conv2d(F.silu(F.group_norm(x, 4, n1w, n1b)), c1w, c1b, padding=1)
    h = h + F.linear(F.silu(temb), tw, tb)[:, :, None, None]
    h = F.conv2d(F.silu(F.group_norm(h, 4, n2w, n2b)), c2w, c2b, padding=1)
    return x + h


def _rotate_half(x):
    x1, x2 = x.chunk(2, -1)
    return torch.cat((-x2, x1), -1)


def rotary_attention(x, w_qkv, w_out, cos, sin):
    """GPT-NeoX style: rotary embeddings on q and k (rotate_half), softmax attention."""
    b, s, d = x.shape
    q, k, v = (x @ w_qkv).view(b, s, 3, 4, d // 4).permute(2, 0, 3, 1, 4)
    q = q * cos + _rotate_half(q) * sin
    k = k * cos + _rotate_half(k) * sin
    attn = torch.softmax(q @ k.transpose(-1, -2) / (d // 4) ** 0.5, -1)
    return (attn @ v).transpose(1, 2).reshape(b, s, d) @ w_out


def moe_router(x, w_gate):
    """Switch/Mixtral routing: softmax over experts, top-2, renormalize, dense dispatch mask,
    the load-balancing auxiliary loss."""
    probs = torch.softmax(x @ w_gate, -1)
    top, idx = probs.topk(2, -1)
    top = top / top.sum(-1, keepdim=True)
    mask = F.one_hot(idx, probs.shape[-1]).sum(1).float()
    aux = (mask.mean(0) * probs.mean(0)).sum() * probs.shape[-1]
    dispatch = torch.zeros_like(probs).scatter(-1, idx, top)
    return dispatch, aux


def gru_unrolled(x, h, w_ih, w_hh, b_ih, b_hh):
    """torch.nn.GRUCell's equations, three time steps."""
    for t in range(3):
        gi, gh = F.linear(x[:, t], w_ih, b_ih), F.linear(h, w_hh, b_hh)
        i_r, i_z, i_n = gi.chunk(3, 1)
        h_r, h_z, h_n = gh.chunk(3, 1)
        r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        h = (1 - z) * n + z * h
    return h


def label_smoothing_loss(logits, target):
    """timm's LabelSmoothingCrossEntropy: NLL of the target mixed with the mean log-prob."""
    logprobs = F.log_softmax(logits, -1)
    nll = -logprobs.gather(-1, target.unsqueeze(1)).squeeze(1)
    return (0.9 * nll + 0.1 * -logprobs.mean(-1)).mean()


def nt_xent_loss(z1, z2):
    """SimCLR's NT-Xent: normalized embeddings, cosine similarities, self-pairs masked."""
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.t() / 0.5
    n = z1.shape[0]
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(z.device)
    return F.cross_entropy(sim, target)


def top_p_filter(logits):
    """Nucleus sampling's filter: sort, cumulative softmax, mask past p, scatter back."""
    sorted_logits, order = torch.sort(logits, descending=True)
    cum = torch.softmax(sorted_logits, -1).cumsum(-1)
    remove = cum > 0.9
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    mask = remove.scatter(1, order, remove)
    return torch.softmax(logits.masked_fill(mask, float("-inf")), -1)


def adam_step(param, grad, exp_avg, exp_avg_sq):
    """torch.optim.Adam's single-tensor update written out, in place (step 3, weight decay)."""
    grad = grad.add(param, alpha=0.01)
    exp_avg.lerp_(grad, 0.1)
    exp_avg_sq.mul_(0.999).addcmul_(grad, grad, value=0.001)
    denom = (exp_avg_sq.sqrt() / (1 - 0.999 ** 3) ** 0.5).add_(1e-8)
    param.addcdiv_(exp_avg, denom, value=-1e-3 / (1 - 0.9 ** 3))
    return param


def bf16_mlp(x, lnw, lnb, w1, b1, w2, b2):
    """A pre-norm transformer MLP in bfloat16 with a residual."""
    h = F.layer_norm(x, (x.shape[-1],), lnw, lnb)
    return x + F.linear(F.gelu(F.linear(h, w1, b1), approximate="tanh"), w2, b2)


def dlrm_interaction(dense, emb_ids, tables, wb, bb, wt, bt):
    """DLRM: bottom MLP, embedding bags, pairwise dot products (upper triangle), top MLP."""
    x = F.relu(F.linear(dense, wb, bb))
    embs = [F.embedding(emb_ids[:, i], tables[i]).sum(1) for i in range(tables.shape[0])]
    t = torch.stack([x, *embs], 1)
    z = t @ t.transpose(1, 2)
    li, lj = torch.triu_indices(t.shape[1], t.shape[1], 1, device=z.device)
    return torch.sigmoid(F.linear(torch.cat([x, z[:, li, lj]], 1), wt, bt))


def roberta_positions(input_ids, word, pos, lnw, lnb):
    """RoBERTa's position ids from padding (cumsum of the mask), embeddings, LayerNorm."""
    mask = input_ids.ne(1).int()
    positions = (torch.cumsum(mask, 1).type_as(mask) * mask).long() + 1
    h = F.embedding(input_ids, word) + F.embedding(positions, pos)
    return F.layer_norm(h, (h.shape[-1],), lnw, lnb)


def inception_cat(x, w1, w3, w5):
    """Inception-style block: branches of different convs and a pool, concatenated, ReLU."""
    a = F.relu(F.conv2d(x, w1))
    b = F.relu(F.conv2d(x, w3, padding=1))
    c = F.relu(F.conv2d(x, w5, padding=2))
    d = F.max_pool2d(x, 3, 1, 1)
    return torch.cat([a, b, c, d], 1)


def gpt_block(x, ln1w, ln1b, w_attn, b_attn, w_proj, b_proj, ln2w, ln2b, w_fc, b_fc, w_out, b_out):
    """A pre-LN GPT block (nanoGPT's): causal self-attention with a tril mask, GELU-tanh MLP."""
    b, s, d = x.shape
    q, k, v = F.linear(F.layer_norm(x, (d,), ln1w, ln1b), w_attn, b_attn).split(d, 2)
    q, k, v = (t.view(b, s, 4, d // 4).transpose(1, 2) for t in (q, k, v))
    att = (q @ k.transpose(-2, -1)) * (1.0 / (d // 4) ** 0.5)
    mask = torch.tril(torch.ones(s, s, device=x.device)).view(1, 1, s, s)
    att = torch.softmax(att.masked_fill(mask == 0, float("-inf")), -1)
    x = x + F.linear((att @ v).transpose(1, 2).contiguous().view(b, s, d), w_proj, b_proj)
    h = F.gelu(F.linear(F.layer_norm(x, (d,), ln2w, ln2b), w_fc, b_fc), approximate="tanh")
    return x + F.linear(h, w_out, b_out)


def bert_layer(x, mask, wq, wk, wv, wo, ln1w, ln1b, w1, w2, ln2w, ln2b):
    """A post-LN BERT layer: an additive padding mask, GELU (erf), LayerNorm after each add."""
    b, s, d = x.shape

    def heads(t):
        return t.view(b, s, 4, d // 4).permute(0, 2, 1, 3)

    scores = heads(x @ wq) @ heads(x @ wk).transpose(-1, -2) / (d // 4) ** 0.5
    scores = scores + (1.0 - mask[:, None, None, :]) * -10000.0
    ctx = (torch.softmax(scores, -1) @ heads(x @ wv)).permute(0, 2, 1, 3).reshape(b, s, d)
    x = F.layer_norm(x + ctx @ wo, (d,), ln1w, ln1b)
    return F.layer_norm(x + F.gelu(x @ w1) @ w2, (d,), ln2w, ln2b)


def convnext_block(x, dw, dwb, lnw, lnb, w1, b1, w2, b2, gamma):
    """ConvNeXt: depthwise 7x7, channels-last LayerNorm, inverted MLP, layer scale, residual."""
    h = F.conv2d(x, dw, dwb, padding=3, groups=x.shape[1]).permute(0, 2, 3, 1)
    h = F.linear(F.gelu(F.linear(F.layer_norm(h, (h.shape[-1],), lnw, lnb), w1, b1)), w2, b2)
    return x + (gamma * h).permute(0, 3, 1, 2)


def _bn(x, p):
    mean, var, w, b = p
    return F.batch_norm(x, mean, var, w, b, training=False)


def resnet_basic_block(x, w1, bn1m, bn1v, bn1w, bn1b, w2, bn2m, bn2v, bn2w, bn2b):
    """torchvision's BasicBlock in eval: conv, BatchNorm (running stats), ReLU, twice, residual."""
    h = F.relu(_bn(F.conv2d(x, w1, padding=1), (bn1m, bn1v, bn1w, bn1b)))
    return F.relu(_bn(F.conv2d(h, w2, padding=1), (bn2m, bn2v, bn2w, bn2b)) + x)


def llama_gqa_attention(x, g, wq, wk, wv, wo, positions):
    """Llama: RMSNorm in float32, rotary from inverse frequencies, 4 query heads sharing 2 kv
    heads (repeat_kv), softmax in float32, output projection, residual."""
    b, s, d = x.shape
    hd = d // 4
    h = x.float()
    h = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * g
    q = (h @ wq).view(b, s, 4, hd).transpose(1, 2)
    k = (h @ wk).view(b, s, 2, hd).transpose(1, 2)
    v = (h @ wv).view(b, s, 2, hd).transpose(1, 2)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=x.device).float() / hd))
    freqs = positions[:, :, None].float() * inv_freq[None, None, :]
    emb = torch.cat((freqs, freqs), -1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]
    q = q * cos + _rotate_half(q) * sin
    k = k * cos + _rotate_half(k) * sin
    k = k[:, :, None].expand(b, 2, 2, s, hd).reshape(b, 4, s, hd)
    v = v[:, :, None].expand(b, 2, 2, s, hd).reshape(b, 4, s, hd)
    att = torch.softmax((q @ k.transpose(2, 3)) / hd ** 0.5, -1, dtype=torch.float32)
    return x + (att.to(q.dtype) @ v).transpose(1, 2).reshape(b, s, d) @ wo


def inverted_residual(x, w1, m1, v1, g1, b1, dw, m2, v2, g2, b2, w3, m3, v3, g3, b3):
    """MobileNetV2: 1x1 expand, BN, ReLU6, depthwise 3x3, BN, ReLU6, 1x1 project, BN, add."""
    h = F.relu6(_bn(F.conv2d(x, w1), (m1, v1, g1, b1)))
    h = F.relu6(_bn(F.conv2d(h, dw, padding=1, groups=h.shape[1]), (m2, v2, g2, b2)))
    return x + _bn(F.conv2d(h, w3), (m3, v3, g3, b3))


def vit_embed(pixels, w, b, cls, pos, lnw, lnb):
    """ViT: patchify by a strided conv, flatten, a class token in front, positions, LayerNorm."""
    h = F.conv2d(pixels, w, b, stride=4).flatten(2).transpose(1, 2)
    h = torch.cat([cls.expand(h.shape[0], -1, -1), h], 1) + pos
    return F.layer_norm(h, (h.shape[-1],), lnw, lnb)


def _bn_params(c):
    return (torch.zeros(c), torch.ones(c), _r(c), _r(c))


TUNING = {
    "diffusion_resblock": (diffusion_resblock, lambda: (
        _r(2, 8, 8, 8), _r(2, 16), _r(8), _r(8), _r(8, 8, 3, 3), _r(8), _r(8, 16), _r(8),
        _r(8), _r(8), _r(8, 8, 3, 3), _r(8))),
    "rotary_attention": (rotary_attention, lambda: (
        _r(2, 8, 32), _r(32, 96), _r(32, 32), _r(8, 8), _r(8, 8))),
    "moe_router": (moe_router, lambda: (_r(16, 32), _r(32, 8))),
    "gru_unrolled": (gru_unrolled, lambda: (
        _r(4, 3, 16), _r(4, 32), _r(96, 16), _r(96, 32), _r(96), _r(96))),
    "label_smoothing_loss": (label_smoothing_loss, lambda: (
        _r(16, 50), torch.randint(0, 50, (16,)))),
    "nt_xent_loss": (nt_xent_loss, lambda: (_r(8, 16), _r(8, 16))),
    "top_p_filter": (top_p_filter, lambda: (_r(4, 64),)),
    "adam_step": (adam_step, lambda: (_r(64, 32), _r(64, 32), _r(64, 32), _r(64, 32).abs())),
    "bf16_mlp": (bf16_mlp, lambda: tuple(t.bfloat16() for t in (
        _r(16, 32), _r(32), _r(32), _r(64, 32), _r(64), _r(32, 64), _r(32)))),
    "dlrm_interaction": (dlrm_interaction, lambda: (
        _r(8, 13), torch.randint(0, 20, (8, 3, 2)), _r(3, 20, 16), _r(16, 13), _r(16),
        _r(1, 22), _r(1))),
    "roberta_positions": (roberta_positions, lambda: (
        torch.randint(0, 30, (2, 12)), _r(30, 16), _r(40, 16), _r(16), _r(16))),
    "inception_cat": (inception_cat, lambda: (
        _r(2, 8, 8, 8), _r(4, 8, 1, 1), _r(4, 8, 3, 3), _r(4, 8, 5, 5))),
    "gpt_block": (gpt_block, lambda: (
        _r(2, 8, 32), _r(32), _r(32), _r(96, 32), _r(96), _r(32, 32), _r(32), _r(32), _r(32),
        _r(128, 32), _r(128), _r(32, 128), _r(32))),
    "bert_layer": (bert_layer, lambda: (
        _r(2, 8, 32), torch.ones(2, 8), _r(32, 32), _r(32, 32), _r(32, 32), _r(32, 32),
        _r(32), _r(32), _r(32, 64), _r(64, 32), _r(32), _r(32))),
    "convnext_block": (convnext_block, lambda: (
        _r(2, 16, 8, 8), _r(16, 1, 7, 7), _r(16), _r(16), _r(16), _r(64, 16), _r(64),
        _r(16, 64), _r(16), _r(16))),
    "resnet_basic_block": (resnet_basic_block, lambda: (
        _r(2, 8, 8, 8), _r(8, 8, 3, 3), *_bn_params(8), _r(8, 8, 3, 3), *_bn_params(8))),
    "llama_gqa_attention": (llama_gqa_attention, lambda: (
        _r(2, 8, 32), _r(32), _r(32, 32), _r(32, 16), _r(32, 16), _r(32, 32),
        torch.arange(8).expand(2, 8).contiguous())),
    "inverted_residual": (inverted_residual, lambda: (
        _r(2, 8, 8, 8), _r(32, 8, 1, 1), *_bn_params(32), _r(32, 1, 3, 3), *_bn_params(32),
        _r(8, 32, 1, 1), *_bn_params(8))),
    "vit_embed": (vit_embed, lambda: (
        _r(2, 3, 16, 16), _r(32, 3, 4, 4), _r(32), _r(1, 1, 32), _r(1, 17, 32), _r(32),
        _r(32))),
}
