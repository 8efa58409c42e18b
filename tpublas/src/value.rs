//! ATen operator arguments as the host passes them (a small `IValue`): tensors, Python
//! scalars, ints, int lists, bools and `None`. [`Args`] reads them positionally, and every
//! mistake is a [`BlasError`] naming the operator and the argument.

use crate::BlasError;
use tpukit::HostArray;
use tpukit::dsl::DType;
use tpukit::dsl::ErrorKind;

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Tensor(HostArray),
    /// A tensor given by its last two axes' transpose: the array is the tensor's `.mT`,
    /// row-major, which is how a transposed view (`w.t()`, `x.transpose(-2, -1)` of a
    /// row-major array) lies in memory, so the host passes it without a copy. Only the
    /// operands an operator reads this way ([`crate::table::Op::reads_transposed`]) are
    /// given one; elsewhere it is an error.
    Transposed(HostArray),
    /// A Python float or int scalar (never promotes a tensor's dtype).
    Scalar(f64),
    Int(i64),
    IntList(Vec<i64>),
    Bool(bool),
    /// A string argument (`approximate='tanh'`).
    Str(String),
    None,
}

impl Value {
    /// A tensor's array, as it lies ([`Value::Tensor`] or [`Value::Transposed`]).
    pub fn array(&self) -> Option<&HostArray> {
        match self {
            Value::Tensor(t) | Value::Transposed(t) => Some(t),
            _ => None,
        }
    }
}

impl From<HostArray> for Value {
    fn from(x: HostArray) -> Value {
        Value::Tensor(x)
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Value {
        Value::Scalar(x)
    }
}

impl From<i64> for Value {
    fn from(x: i64) -> Value {
        Value::Int(x)
    }
}

impl From<Vec<i64>> for Value {
    fn from(x: Vec<i64>) -> Value {
        Value::IntList(x)
    }
}

impl From<bool> for Value {
    fn from(x: bool) -> Value {
        Value::Bool(x)
    }
}

impl From<&str> for Value {
    fn from(x: &str) -> Value {
        Value::Str(x.to_string())
    }
}

/// Positional access to an operator's arguments; missing trailing arguments take defaults.
pub struct Args<'a> {
    pub op: &'a str,
    pub values: &'a [Value],
}

impl<'a> Args<'a> {
    pub fn new(op: &'a str, values: &'a [Value]) -> Args<'a> {
        Args { op, values }
    }

    pub fn err(&self, message: impl std::fmt::Display) -> BlasError {
        BlasError::new(self.op, message)
    }

    fn get(&self, i: usize) -> Option<&'a Value> {
        self.values.get(i).filter(|v| **v != Value::None)
    }

    pub fn tensor(&self, i: usize) -> Result<&'a HostArray, BlasError> {
        match self.get(i) {
            Some(Value::Tensor(t)) => Ok(t),
            Some(Value::Transposed(_)) => Err(self.err(format!(
                "argument {i} is a transposed view, which this operator does not read in place"
            ))),
            other => Err(self.err(format!("argument {i} must be a tensor, got {other:?}"))),
        }
    }

    /// A tensor argument as it lies: its array, and whether that is the tensor's last two
    /// axes transposed ([`Value::Transposed`]).
    pub fn operand(&self, i: usize) -> Result<(&'a HostArray, bool), BlasError> {
        match self.get(i) {
            Some(Value::Transposed(t)) => Ok((t, true)),
            _ => Ok((self.tensor(i)?, false)),
        }
    }

    pub fn opt_tensor(&self, i: usize) -> Result<Option<&'a HostArray>, BlasError> {
        match self.get(i) {
            None => Ok(None),
            Some(_) => self.tensor(i).map(Some),
        }
    }

    pub fn scalar_or(&self, i: usize, default: f64) -> Result<f64, BlasError> {
        match self.get(i) {
            None => Ok(default),
            Some(Value::Scalar(x)) => Ok(*x),
            Some(Value::Int(x)) => Ok(*x as f64),
            Some(other) => Err(self.err(format!("argument {i} must be a scalar, got {other:?}"))),
        }
    }

    pub fn opt_scalar(&self, i: usize) -> Result<Option<f64>, BlasError> {
        match self.get(i) {
            None => Ok(None),
            Some(_) => self.scalar_or(i, 0.0).map(Some),
        }
    }

    pub fn int(&self, i: usize) -> Result<i64, BlasError> {
        match self.get(i) {
            Some(Value::Int(x)) => Ok(*x),
            other => Err(self.err(format!("argument {i} must be an int, got {other:?}"))),
        }
    }

    /// An int list; a single int counts as a one-element list (`dim=1`).
    pub fn int_list(&self, i: usize) -> Result<Vec<i64>, BlasError> {
        match self.get(i) {
            Some(Value::IntList(v)) => Ok(v.clone()),
            Some(Value::Int(x)) => Ok(vec![*x]),
            other => Err(self.err(format!("argument {i} must be an int list, got {other:?}"))),
        }
    }

    pub fn opt_int_list(&self, i: usize) -> Result<Option<Vec<i64>>, BlasError> {
        match self.get(i) {
            None => Ok(None),
            Some(_) => self.int_list(i).map(Some),
        }
    }

    pub fn bool_or(&self, i: usize, default: bool) -> Result<bool, BlasError> {
        match self.get(i) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(self.err(format!("argument {i} must be a bool, got {other:?}"))),
        }
    }

    pub fn str_or(&self, i: usize, default: &'a str) -> Result<&'a str, BlasError> {
        match self.get(i) {
            None => Ok(default),
            Some(Value::Str(s)) => Ok(s),
            Some(other) => Err(self.err(format!("argument {i} must be a string, got {other:?}"))),
        }
    }

    /// An optional dtype (ATen's `ScalarType?`, passed by name: `"f32"`, `"bf16"`), one of
    /// those tpuBLAS serves.
    pub fn opt_dtype(&self, i: usize) -> Result<Option<DType>, BlasError> {
        match self.get(i) {
            None => Ok(None),
            Some(Value::Str(name)) => match DType::parse(name) {
                Some(d) if crate::promote::served(d) => Ok(Some(d)),
                _ => Err(self
                    .err(format!(
                        "argument {i}: unsupported dtype `{name}` (tpuBLAS serves f32 and bf16)"
                    ))
                    .with_kind(ErrorKind::DType)),
            },
            Some(other) => Err(self.err(format!("argument {i} must be a dtype, got {other:?}"))),
        }
    }

    /// A dimension index (negative counts from the end) checked against `rank`.
    pub fn dim(&self, d: i64, rank: usize) -> Result<usize, BlasError> {
        let r = rank.max(1) as i64;
        let n = if d < 0 { d + r } else { d };
        if n < 0 || n >= r {
            return Err(self
                .err(format!(
                    "dim {d} is out of range for a tensor of rank {rank}"
                ))
                .with_kind(ErrorKind::Shape));
        }
        Ok(n as usize)
    }
}
