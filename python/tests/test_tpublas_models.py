"""Unmodified transformer training steps under `tpublas.mode(fallback="error")`: HF
`transformers`' GPT2LMHeadModel (random weights from a GPT2Config, nothing downloaded) and a
nanoGPT-style model written here (causal attention by `tril` mask + `masked_fill` +
`softmax`, or by `scaled_dot_product_attention(is_causal=True)`; GELU MLP; dropout;
LayerNorm; tied embedding; cross entropy). Forward, loss and backward: the loss and every
parameter's gradient against torch eager (f32: rtol 1e-4; bf16 loosely); with dropout on,
the step runs whole on tpuBLAS too, repeatably under `torch.manual_seed`."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import tpukit.tpublas as tb  # noqa: E402

nn, F = torch.nn, torch.nn.functional
VOCAB, WIDTH, HEADS, SEQ, LAYERS = 1000, 128, 4, 64, 2


class CausalSelfAttention(nn.Module):
    def __init__(self, p, sdpa):
        super().__init__()
        self.c_attn, self.c_proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.drop, self.p, self.sdpa = nn.Dropout(p), p, sdpa
        self.register_buffer("bias", torch.tril(torch.ones(SEQ, SEQ)).view(1, 1, SEQ, SEQ))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
            y = self.drop(F.softmax(att, dim=-1)) @ v
        return self.drop(self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c)))


class Block(nn.Module):
    def __init__(self, p, sdpa):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.attn = CausalSelfAttention(p, sdpa)
        self.c_fc, self.c_proj = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.drop(self.c_proj(F.gelu(self.c_fc(self.ln_2(x)))))


class NanoGPT(nn.Module):
    def __init__(self, p=0.0, sdpa=False):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, WIDTH), nn.Embedding(SEQ, WIDTH)
        self.drop = nn.Dropout(p)
        self.blocks = nn.ModuleList(Block(p, sdpa) for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(WIDTH)
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.wte.weight = self.lm_head.weight  # tied

    def forward(self, idx, targets):
        pos = torch.arange(0, idx.size(1), dtype=torch.long)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1), ignore_index=-1)


def hf_gpt2(dtype=torch.float32, attn="sdpa"):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=LAYERS, n_embd=WIDTH, n_head=HEADS, n_positions=SEQ,
                                  vocab_size=VOCAB, resid_pdrop=0.0, embd_pdrop=0.0,
                                  attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
                                  attn_implementation=attn)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg).to(dtype)

    def loss(x):
        return model(x, labels=x).loss

    return model, loss


def nano_gpt(dtype=torch.float32, p=0.0, sdpa=False):
    torch.manual_seed(0)
    model = NanoGPT(p, sdpa).to(dtype)
    return model, lambda x: model(x, x)


def tokens():
    return torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(1))


def train_step(model, loss_of, x):
    model.zero_grad(set_to_none=True)
    loss = loss_of(x)
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters()}


def on_tpublas(model, loss_of, x):
    with tb.mode(fallback="error") as m:
        loss, grads = train_step(model, loss_of, x)
    assert not m.fallback
    return loss, grads, m


MODELS = {
    "hf-gpt2-sdpa": lambda dtype: hf_gpt2(dtype),
    "nanogpt-masked-softmax": lambda dtype: nano_gpt(dtype),
    "nanogpt-sdpa": lambda dtype: nano_gpt(dtype, sdpa=True),
}


@pytest.mark.parametrize("name", MODELS)
def test_training_step_matches_torch_eager(name):
    model, loss_of = MODELS[name](torch.float32)
    x = tokens()
    want_loss, want = train_step(model, loss_of, x)
    loss, got, m = on_tpublas(model, loss_of, x)
    torch.testing.assert_close(loss, want_loss, rtol=1e-4, atol=1e-6)
    assert got.keys() == want.keys()
    for n in want:
        torch.testing.assert_close(got[n], want[n], rtol=1e-4, atol=1e-5, msg=n)
    assert m.served["aten.embedding_dense_backward.default"] >= 1
    assert m.served["aten.nll_loss_backward.default"] == 1


@pytest.mark.parametrize("name", ["hf-gpt2-sdpa", "nanogpt-masked-softmax"])
def test_bf16_training_step_is_close_to_torch_eager(name):
    model, loss_of = MODELS[name](torch.bfloat16)
    x = tokens()
    want_loss, want = train_step(model, loss_of, x)
    loss, got, _ = on_tpublas(model, loss_of, x)
    torch.testing.assert_close(loss.float(), want_loss.float(), rtol=2e-2, atol=2e-2)
    for n in want:
        scale = max(1.0, want[n].abs().max().item())
        torch.testing.assert_close(got[n].float(), want[n].float(), rtol=5e-2,
                                   atol=5e-2 * scale, msg=n)


@pytest.mark.parametrize("sdpa", [False, True])
def test_dropout_step_runs_on_tpublas_repeatably(sdpa):
    model, loss_of = nano_gpt(p=0.1, sdpa=sdpa)
    x = tokens()
    torch.manual_seed(5)
    loss, grads, m = on_tpublas(model, loss_of, x)
    assert m.served["aten.bernoulli_.float"] >= 1
    torch.manual_seed(5)
    again, grads_again, _ = on_tpublas(model, loss_of, x)
    assert torch.equal(loss, again)
    assert all(torch.equal(grads[n], grads_again[n]) for n in grads)
    model.eval()  # dropout off: the same model's loss as eager's
    want, _ = train_step(model, loss_of, x)
    assert loss != want and abs(loss - want) < 0.5


def test_dropout_keeps_the_right_fraction_and_backward_uses_the_mask():
    x = torch.rand(64, 1000).add(0.5).requires_grad_()
    with tb.mode(fallback="error") as m:
        y = F.dropout(x, p=0.3, training=True)
        y.sum().backward()
    kept = y != 0
    n = kept.numel()
    assert abs(kept.float().mean().item() - 0.7) < 4 * math.sqrt(0.7 * 0.3 / n)
    torch.testing.assert_close(y[kept], x.detach()[kept] / 0.7)
    torch.testing.assert_close(x.grad, kept.float() / 0.7)
    assert m.served["aten.bernoulli_.float"] == 1
