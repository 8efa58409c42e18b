"""The derivatives of tpuBLAS's torch custom ops, computed with tpuBLAS's own kernels.

Every formula calls ``torch.ops.tpublas.*`` (so a backward runs on tpuBLAS, traces under
``torch.compile`` and is itself differentiable where its ops are). Besides tpuBLAS kernels a
formula only uses views (``unsqueeze``, ``expand``, ``reshape`` of contiguous results,
``narrow``), which move no data, and factories of constants (``zeros``, ``ones``, ``eye``,
``arange``). tpuBLAS has no cast kernel: ``_cast`` is a sum over a unit dimension with
``dtype=``, which is exact.

``FORMULAS`` maps an op's torch name (``add.Tensor``) to its backward. A backward gets an
``Inputs`` (the call's arguments by schema name, its outputs and ``need(name)``) and the
gradients of the outputs, and returns ``{argument name: gradient}``; arguments it leaves
out get ``None`` (they are not differentiable, or not needed). Ops missing from ``FORMULAS``
raise ``UnsupportedError`` naming the op when ``backward()`` reaches them. Formulas follow
ATen's ``derivatives.yaml`` semantics: broadcast inputs get gradients summed back to their
shapes, ties of ``maximum``/``minimum`` split the gradient, ``amax`` spreads it evenly over
equal maxima, ``clamp`` passes it where the input is strictly within bounds (as torch does).
"""

from __future__ import annotations

import torch

from tpukit._native import UnsupportedError

T = torch.ops.tpublas


class Inputs:
    """One call's arguments by schema name (``a.self``, ``a.alpha``), its ``outputs`` (a
    tuple), and which tensor arguments need a gradient (``need("self")``)."""

    def __init__(self, names, values, outputs, needs):
        self.__dict__.update(zip(names, values, strict=True))
        self.outputs = outputs
        self._needs = needs

    @property
    def out(self):
        return self.outputs[0]

    def need(self, name) -> bool:
        return self._needs.get(name, False)


# --- helpers ---------------------------------------------------------------------------------


def _cast(t, dtype):
    """``t`` as ``dtype``: tpuBLAS's sum over a new unit dimension with ``dtype=`` (exact)."""
    if t.dtype == dtype:
        return t
    return T.sum.dim_IntList(t.unsqueeze(0), [0], False, dtype=dtype)


def _sum_to(g, like):
    """``g`` summed over the dimensions ``like`` was broadcast along, as ``like``'s dtype."""
    shape = tuple(like.shape)
    lead = g.dim() - len(shape)
    ones = [lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1]
    if ones:
        g = T.sum.dim_IntList(g, ones, True)
    if lead:
        g = T.sum.dim_IntList(g, list(range(lead)), False)
    return _cast(g, like.dtype)


def _one_minus(t):
    return T.add.Scalar(T.neg(t), 1)


def _scaled(t, factor):
    return t if factor == 1 else T.mul.Scalar(t, factor)


def _dims(dim, ndim) -> list[int]:
    """A reduction's ``dim`` argument as sorted non-negative dimensions (all for None/[])."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return sorted(d % max(ndim, 1) for d in dims)


def _unreduce(g, dims, keepdim, like):
    """A reduction's gradient ``g`` back at ``like``'s shape: its reduced dimensions
    restored (views) and expanded (a view), as ``like``'s dtype."""
    if not keepdim:
        for d in dims:
            g = g.unsqueeze(d)
    return _cast(g, like.dtype).expand(like.shape)


def _transpose_last(t):
    return T.transpose.int(t, -2, -1)


def _pass_where(g, x, low, high):
    """``g`` where ``low < x < high`` (a bound of None is no bound), else 0."""
    if low is not None:
        g = T.threshold_backward(g, x, low)
    if high is not None:
        g = T.threshold_backward(g, T.neg(x), -high)
    return g


def _onehot(index, n, dtype, zero_row=None):
    """``(len(index), n)`` rows of the identity picked by ``index`` (tpuBLAS's embedding);
    with ``zero_row``, that index's row is zero."""
    eye = torch.eye(n, dtype=dtype, device=index.device)
    if zero_row is not None:
        eye[zero_row, zero_row] = 0
    return T.embedding(eye, index.reshape(-1))


# --- formulas --------------------------------------------------------------------------------


def _tanh(a, g):
    return {"self": T.mul.Tensor(g, _one_minus(T.mul.Tensor(a.out, a.out)))}


def _sigmoid(a, g):
    return {"self": T.mul.Tensor(g, T.mul.Tensor(a.out, _one_minus(a.out)))}


def _silu(a, g):
    # silu' = s·(1 + x·(1 − s)), s = sigmoid(x)
    s = T.sigmoid(a.self)
    inner = T.add.Scalar(T.mul.Tensor(a.self, _one_minus(s)), 1)
    return {"self": T.mul.Tensor(g, T.mul.Tensor(s, inner))}


def _abs(a, g):
    # g·sign(self): g where self > 0, −g where self < 0, 0 at 0.
    return {"self": T.sub.Tensor(T.threshold_backward(g, a.self, 0),
                                 T.threshold_backward(g, T.neg(a.self), 0))}


def _add(sign):
    def formula(a, g):
        alpha = sign * a.alpha
        return {"self": _sum_to(g, a.self), "other": _sum_to(_scaled(g, alpha), a.other)}

    return formula


def _mul(a, g):
    return {"self": _sum_to(T.mul.Tensor(g, a.other), a.self) if a.need("self") else None,
            "other": _sum_to(T.mul.Tensor(g, a.self), a.other) if a.need("other") else None}


def _div(a, g):
    return {"self": _sum_to(T.div.Tensor(g, a.other), a.self) if a.need("self") else None,
            "other": _sum_to(T.neg(T.div.Tensor(T.mul.Tensor(g, a.out), a.other)), a.other)
            if a.need("other") else None}


def _addc(divide: bool):
    """``addcmul`` (``x + value·a·b``) and ``addcdiv`` (``x + value·a / b``)."""

    def formula(a, g):
        scaled = _scaled(g, a.value)
        grads = {"self": _sum_to(g, a.self)}
        if a.need("tensor1"):
            by = T.div.Tensor if divide else T.mul.Tensor
            grads["tensor1"] = _sum_to(by(scaled, a.tensor2), a.tensor1)
        if a.need("tensor2"):
            if divide:  # −value·g·a / b²
                quotient = T.div.Tensor(T.div.Tensor(T.mul.Tensor(scaled, a.tensor1),
                                                     a.tensor2), a.tensor2)
                grads["tensor2"] = _sum_to(T.neg(quotient), a.tensor2)
            else:
                grads["tensor2"] = _sum_to(T.mul.Tensor(scaled, a.tensor1), a.tensor2)
        return grads

    return formula


def _lerp(a, g):
    return {"self": _sum_to(_scaled(g, 1 - a.weight), a.self),
            "end": _sum_to(_scaled(g, a.weight), a.end)}


def _extremum(sign):
    """``maximum`` (sign 1) and ``minimum`` (-1): the gradient goes to the larger (smaller)
    argument, half to each on a tie."""

    def formula(a, g):
        d = T.sub.Tensor(a.self, a.other) if sign > 0 else T.sub.Tensor(a.other, a.self)
        to_self = T.threshold_backward(g, d, 0)
        to_other = T.threshold_backward(g, T.neg(d), 0)
        half_tie = T.mul.Scalar(T.sub.Tensor(T.sub.Tensor(g, to_self), to_other), 0.5)
        return {"self": _sum_to(T.add.Tensor(to_self, half_tie), a.self),
                "other": _sum_to(T.add.Tensor(to_other, half_tie), a.other)}

    return formula


def _pow_tensor(a, g):
    out = {}
    if a.need("self"):
        power = T.pow.Tensor_Tensor(a.self, T.sub.Scalar(a.exponent, 1))
        out["self"] = _sum_to(T.mul.Tensor(g, T.mul.Tensor(a.exponent, power)), a.self)
    if a.need("exponent"):
        # d/d exponent is out·log(self); 0 where self is 0 (ATen's convention, not NaN).
        grad = T.mul.Tensor(g, T.mul.Tensor(a.out, T.log(a.self)))
        out["exponent"] = _sum_to(T.threshold_backward(grad, T.abs(a.self), 0), a.exponent)
    return out


def _pow_scalar(a, g):
    e = a.exponent
    if e == 0:
        return {"self": torch.zeros_like(a.self)}
    return {"self": T.mul.Scalar(T.mul.Tensor(g, T.pow.Tensor_Scalar(a.self, e - 1)), e)}


def _where(a, g):
    zero = torch.zeros((), dtype=g.dtype, device=g.device)
    return {"self": _sum_to(T.where.self(a.condition, g, zero), a.self),
            "other": _sum_to(T.where.self(a.condition, zero, g), a.other)}


def _threshold_backward(a, g):
    return {"grad_output": T.threshold_backward(g, a.self, a.threshold),
            "self": torch.zeros_like(a.self)}


def _sum(a, g):
    return {"self": _unreduce(g, _dims(a.dim, a.self.dim()), a.keepdim, a.self)}


def _mean(a, g):
    dims = _dims(a.dim, a.self.dim())
    count = 1
    for d in dims:
        count *= a.self.shape[d] if a.self.dim() else 1
    return {"self": _unreduce(T.mul.Scalar(g, 1.0 / count), dims, a.keepdim, a.self)}


def _amax(a, g):
    dims = _dims(a.dim, a.self.dim())
    out, g_kept = a.out, g
    if not a.keepdim:
        for d in dims:
            out, g_kept = out.unsqueeze(d), g_kept.unsqueeze(d)
    below = T.sub.Tensor(out, a.self)  # broadcast: ≥ 0, 0 at the maxima
    at_max = _one_minus(T.threshold_backward(torch.ones_like(a.self), below, 0))
    share = T.div.Tensor(g_kept, T.sum.dim_IntList(at_max, dims, True))
    return {"self": T.mul.Tensor(at_max, share)}


def _softmax(a, g):
    return {"self": T._softmax_backward_data(g, a.out, a.dim, a.self.dtype)}


def _log_softmax(a, g):
    total = T.sum.dim_IntList(g, [a.dim], True)
    grad = T.sub.Tensor(g, T.mul.Tensor(T.exp(a.out), total))
    return {"self": _cast(grad, a.self.dtype)}


def _softmax_backward_data(a, gg):
    # grad_input = out·(go − Σ go·out): linear in go with a symmetric Jacobian.
    go, out = a.grad_output, a.output
    grads = {}
    if a.need("grad_output"):
        grads["grad_output"] = T._softmax_backward_data(gg, out, a.dim, a.input_dtype)
    if a.need("output"):
        s = T.sum.dim_IntList(T.mul.Tensor(go, out), [a.dim], True)
        t = T.sum.dim_IntList(T.mul.Tensor(gg, out), [a.dim], True)
        grads["output"] = T.sub.Tensor(T.mul.Tensor(gg, T.sub.Tensor(go, s)), T.mul.Tensor(go, t))
    return grads


def _layer_norm(a, g, *_):
    mask = [a.need("input"), a.need("weight"), a.need("bias")]
    _, mean, rstd = a.outputs
    gi, gw, gb = T.native_layer_norm_backward(
        g, a.input, a.normalized_shape, mean, rstd, a.weight, a.bias, mask
    )
    return {"input": gi if mask[0] else None, "weight": gw if mask[1] else None,
            "bias": gb if mask[2] else None}


def _rms_norm(a, g, *_):
    _, rstd = a.outputs
    dims = list(range(a.input.dim() - len(a.normalized_shape), a.input.dim()))
    xhat = T.mul.Tensor(a.input, rstd)  # in rstd's dtype (f32 for bf16 input)
    grads = {}
    if a.need("weight"):
        lead = list(range(a.input.dim() - len(a.normalized_shape)))
        gw = T.mul.Tensor(g, xhat)
        grads["weight"] = _cast(T.sum.dim_IntList(gw, lead, False) if lead else gw,
                                a.weight.dtype)
    if a.need("input"):
        gy = g if a.weight is None else T.mul.Tensor(g, a.weight)
        proj = T.mean.dim(T.mul.Tensor(gy, xhat), dims, True)
        grad = T.mul.Tensor(rstd, T.sub.Tensor(gy, T.mul.Tensor(xhat, proj)))
        grads["input"] = _cast(grad, a.input.dtype)
    return grads


def _cumsum(a, g):
    # The reverse cumulative sum: flipped (a gather), summed, flipped back.
    dim = a.dim % max(a.self.dim(), 1)
    n = a.self.shape[dim] if a.self.dim() else 1
    if a.self.dim() == 0:
        return {"self": _cast(g, a.self.dtype)}
    flip = torch.arange(n - 1, -1, -1, device=g.device)
    rev = T.index_select(T.cumsum(T.index_select(g, dim, flip), dim), dim, flip)
    return {"self": _cast(rev, a.self.dtype)}


def _mm(a, g):
    return {"self": T.mm(g, T.transpose.int(a.mat2, 0, 1)) if a.need("self") else None,
            "mat2": T.mm(T.transpose.int(a.self, 0, 1), g) if a.need("mat2") else None}


def _bmm(a, g):
    return {"self": T.bmm(g, _transpose_last(a.mat2)) if a.need("self") else None,
            "mat2": T.bmm(_transpose_last(a.self), g) if a.need("mat2") else None}


def _addmm(a, g):
    grads = {}
    if a.need("self"):
        grads["self"] = _sum_to(_scaled(g, a.beta), a.self)
    if a.need("mat1"):
        grads["mat1"] = _scaled(T.mm(g, T.transpose.int(a.mat2, 0, 1)), a.alpha)
    if a.need("mat2"):
        grads["mat2"] = _scaled(T.mm(T.transpose.int(a.mat1, 0, 1), g), a.alpha)
    return grads


def _gather_backward(g, dim, index, n):
    """The gradient of a gather of ``index`` along ``dim`` of an extent ``n``: the rows of
    ``g`` along ``dim`` added into the rows they were picked from (tpuBLAS's embedding
    backward, a segmented sum), so duplicate picks add up."""
    k = index.numel()
    moved = g if dim == 0 else T.permute(g, [dim] + [d for d in range(g.dim()) if d != dim])
    rest = moved.shape[1:]
    rows = moved.reshape(k, -1)
    grad = T.embedding_dense_backward(rows, index.reshape(-1), n, -1, False).reshape(n, *rest)
    if dim == 0:
        return grad
    back = list(range(1, dim + 1)) + [0] + list(range(dim + 1, g.dim()))
    return T.permute(grad, back)


def _index_select(a, g):
    if a.self.dim() == 0:
        return {"self": _cast(g.reshape(()), a.self.dtype)}
    dim = a.dim % a.self.dim()
    return {"self": _gather_backward(g, dim, a.index, a.self.shape[dim])}


def _embedding(a, g):
    if a.sparse:
        raise UnsupportedError(
            "tpublas.embedding: sparse gradients are not supported (pass sparse=False for a "
            "dense weight gradient)"
        )
    n, width = a.weight.shape
    index = a.indices.reshape(-1)
    rows = g.reshape(index.numel(), width)
    if not a.scale_grad_by_freq:
        return {"weight": T.embedding_dense_backward(rows, index, n, a.padding_idx, False)}
    # Each row divided by its index's count: a one-hot product (made of ``n × n``
    # identity rows, so for small tables only; the segmented sum does not scale rows).
    keep = a.padding_idx if a.padding_idx >= 0 else None
    counts = T.sum.dim_IntList(_onehot(index, n, g.dtype), [0], False)
    scale = T.embedding(counts.reshape(n, 1), index)  # each row's index's count
    onehot = T.div.Tensor(_onehot(index, n, g.dtype, zero_row=keep), scale)
    return {"weight": T.mm(T.transpose.int(onehot, 0, 1), rows)}


def _embedding_dense_backward(a, g):
    # The gradient's rows picked back by the indices (ATen's double backward): what each
    # `grad_output` row added into, 0 for rows at `padding_idx` (which added nothing).
    n = a.num_weights
    table = g
    if 0 <= a.padding_idx < n:
        keep = torch.ones_like(g[:, :1])  # a constant (n, 1) column
        keep[a.padding_idx] = 0
        table = T.mul.Tensor(g, keep)
    rows = T.embedding(table, a.indices.reshape(-1))
    return {"grad_output": rows.reshape(a.grad_output.shape)}


def _permute(a, g):
    inverse = [0] * len(a.dims)
    for i, d in enumerate(a.dims):
        inverse[d % len(a.dims)] = i
    return {"self": T.permute(g, inverse)}


def _transpose(a, g):
    return {"self": T.transpose.int(g, a.dim0, a.dim1)}


def _cat(a, g):
    dim = a.dim % max(g.dim(), 1)
    grads, start = [], 0
    for t in a.tensors:
        if t.dim() == 1 and t.shape[0] == 0 and g.dim() != 1:  # ATen's cat skips these
            grads.append(torch.zeros_like(t))
            continue
        n = t.shape[dim]
        grads.append(_cast(g.narrow(dim, start, n), t.dtype))
        start += n
    return {"tensors": grads}


def _nll_loss(a, g, _total):
    grad = T.nll_loss_backward(g, a.self, a.target, a.weight, a.reduction, a.ignore_index,
                               a.outputs[1])
    return {"self": grad}


def _pad(a, g):
    """The padded gradient's middle: a view."""
    for i in range(0, len(a.pad), 2):
        d = g.dim() - 1 - i // 2
        g = g.narrow(d, a.pad[i], a.self.shape[d])
    return {"self": g}


def _masked(names, a, grads):
    """``{name: gradient}`` for the arguments that need one."""
    return {n: g if a.need(n) else None for n, g in zip(names, grads, strict=True)}


def _convolution(a, g):
    names = ("input", "weight", "bias")
    mask = [a.need(n) for n in names]
    bias_sizes = None if a.bias is None else list(a.bias.shape)
    grads = T.convolution_backward(g, a.input, a.weight, bias_sizes, a.stride, a.padding,
                                   a.dilation, a.transposed, a.output_padding, a.groups, mask)
    return _masked(names, a, grads)


def _batch_norm(a, g, *_):
    """``native_batch_norm`` (its running statistics are not differentiated, as in ATen).
    ``_native_batch_norm_legit_functional`` has no derivative: it serves ``mode()``, which
    sits below autograd."""
    names = ("input", "weight", "bias")
    _, mean, invstd = a.outputs[:3]
    grads = T.native_batch_norm_backward(g, a.input, a.weight, a.running_mean, a.running_var,
                                         mean, invstd, a.training, a.eps,
                                         [a.need(n) for n in names])
    return _masked(names, a, grads)


def _max_pool2d(a, g, *_):
    indices = a.outputs[1]
    return {"self": T.max_pool2d_with_indices_backward(
        g, a.self, a.kernel_size, a.stride, a.padding, a.dilation, a.ceil_mode, indices)}


def _avg_pool2d(a, g):
    return {"self": T.avg_pool2d_backward(g, a.self, a.kernel_size, a.stride or a.kernel_size,
                                          a.padding, a.ceil_mode, a.count_include_pad,
                                          a.divisor_override)}


def _attention(a, g, _logsumexp=None):
    """CPU flash attention: its backward kernel, given the forward's output and logsumexp
    (``attn_mask`` is not differentiated, as in ATen)."""
    out, logsumexp = a.outputs
    grads = T._scaled_dot_product_flash_attention_for_cpu_backward(
        g, a.query, a.key, a.value, out, logsumexp, a.dropout_p, a.is_causal,
        attn_mask=a.attn_mask, scale=a.scale)
    return _masked(("query", "key", "value"), a, grads)


def _masked_fill_tensor(a, g):
    """``self``: ``g`` with the filled places 0; ``value`` (0-d): the sum of ``g`` over them."""
    kept = T.masked_fill.Scalar(g, a.mask, 0)
    grads = {"self": _sum_to(kept, a.self) if a.need("self") else None}
    if a.need("value"):
        filled = T.sub.Tensor(g, kept)  # exact: g − g = 0 where kept, g − 0 = g where filled
        grads["value"] = _cast(T.sum.dim_IntList(filled, list(range(g.dim())), False),
                               a.value.dtype)
    return grads


def _tanh_backward(a, gg):
    """``tanh_backward(go, y) = go·(1 − y²)``: linear in ``go``; ``−2·y·go`` along ``y``."""
    grads = {}
    if a.need("grad_output"):
        grads["grad_output"] = T.tanh_backward(gg, a.output)
    if a.need("output"):
        grads["output"] = T.mul.Scalar(T.mul.Tensor(T.mul.Tensor(a.output, a.grad_output), gg),
                                       -2)
    return grads


def _log_softmax_backward_data(a, gg):
    """``go − exp(y)·Σ go`` (over ``dim``): ``gg − Σ gg·exp(y)`` along ``go``,
    ``−gg·exp(y)·Σ go`` along ``y``."""
    p = T.exp(a.output)
    grads = {}
    if a.need("grad_output"):
        total = T.sum.dim_IntList(T.mul.Tensor(gg, p), [a.dim], True)
        grads["grad_output"] = _cast(T.sub.Tensor(gg, total), a.grad_output.dtype)
    if a.need("output"):
        total = T.sum.dim_IntList(a.grad_output, [a.dim], True)
        grads["output"] = _cast(T.neg(T.mul.Tensor(T.mul.Tensor(gg, p), total)),
                                a.output.dtype)
    return grads


def _elementwise(fn):
    """A unary formula ``fn(a, g) -> gradient of self``."""
    return lambda a, g: {"self": fn(a, g)}


FORMULAS = {
    "neg": _elementwise(lambda a, g: T.neg(g)),
    "abs": _abs,
    "exp": _elementwise(lambda a, g: T.mul.Tensor(g, a.out)),
    "log": _elementwise(lambda a, g: T.div.Tensor(g, a.self)),
    "sqrt": _elementwise(lambda a, g: T.div.Tensor(g, T.mul.Scalar(a.out, 2))),
    "rsqrt": _elementwise(
        lambda a, g: T.mul.Scalar(T.mul.Tensor(g, T.pow.Tensor_Scalar(a.out, 3)), -0.5)
    ),
    "tanh": _tanh,
    "sigmoid": _sigmoid,
    "relu": _elementwise(lambda a, g: T.threshold_backward(g, a.out, 0)),
    "silu": _silu,
    "gelu": _elementwise(lambda a, g: T.gelu_backward(g, a.self, approximate=a.approximate)),
    "add.Tensor": _add(1),
    "sub.Tensor": _add(-1),
    "mul.Tensor": _mul,
    "div.Tensor": _div,
    "maximum": _extremum(1),
    "minimum": _extremum(-1),
    "pow.Tensor_Tensor": _pow_tensor,
    "add.Scalar": _elementwise(lambda a, g: g),
    "sub.Scalar": _elementwise(lambda a, g: g),
    "mul.Scalar": _elementwise(lambda a, g: _cast(T.mul.Scalar(g, a.other), a.self.dtype)),
    "div.Scalar": _elementwise(lambda a, g: _cast(T.div.Scalar(g, a.other), a.self.dtype)),
    "pow.Tensor_Scalar": _pow_scalar,
    "where.self": _where,
    "addcmul": _addc(divide=False),
    "addcdiv": _addc(divide=True),
    "lerp.Scalar": _lerp,
    "clamp": _elementwise(lambda a, g: _pass_where(g, a.self, a.min, a.max)),
    "threshold_backward": _threshold_backward,
    "sum.dim_IntList": _sum,
    "mean.dim": _mean,
    "amax": _amax,
    "_softmax": _softmax,
    "_log_softmax": _log_softmax,
    "_softmax_backward_data": _softmax_backward_data,
    "native_layer_norm": _layer_norm,
    "_fused_rms_norm": _rms_norm,
    "cumsum": _cumsum,
    "mm": _mm,
    "bmm": _bmm,
    "addmm": _addmm,
    "index_select": _index_select,
    "embedding": _embedding,
    "embedding_dense_backward": _embedding_dense_backward,
    "permute": _permute,
    "transpose.int": _transpose,
    "cat": _cat,
    "clone": _elementwise(lambda a, g: g),
    "_to_copy": _elementwise(lambda a, g: _cast(g, a.self.dtype)),
    "nll_loss_forward": _nll_loss,
    "masked_fill.Scalar": _elementwise(lambda a, g: T.masked_fill.Scalar(g, a.mask, 0)),
    "constant_pad_nd": _pad,
    "_safe_softmax": _elementwise(
        lambda a, g: T._softmax_backward_data(g, a.out, a.dim, a.self.dtype)),
    "tril": _elementwise(lambda a, g: T.tril(g, a.diagonal)),
    "triu": _elementwise(lambda a, g: T.triu(g, a.diagonal)),
    "convolution": _convolution,
    "native_batch_norm": _batch_norm,
    "max_pool2d_with_indices": _max_pool2d,
    "avg_pool2d": _avg_pool2d,
    "_scaled_dot_product_flash_attention_for_cpu": _attention,
    "masked_fill.Tensor": _masked_fill_tensor,
    "tanh_backward": _tanh_backward,
    "_log_softmax_backward_data": _log_softmax_backward_data,
}

# Outputs that are statistics for a backward kernel, not values to differentiate: marked
# non-differentiable (as ATen's are not differentiated through).
STATISTICS = {"native_layer_norm": (1, 2), "_fused_rms_norm": (1,), "nll_loss_forward": (1,),
              "native_batch_norm": (1, 2), "max_pool2d_with_indices": (1,),
              "_scaled_dot_product_flash_attention_for_cpu": (1,)}
