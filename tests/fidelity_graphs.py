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
