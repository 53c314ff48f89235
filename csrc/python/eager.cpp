// causal_conv1d._eager: the eager entry from Python to the ops that decode loops and fused layers
// call once per step (fwd into a given out, update into a given out, update returning out).
//
// torch.ops' generic call path costs about 1-4 us a call on the GPU machines' hosts above the same
// op called from C++ (benchmarks/host_cost.py): an op overload object, its arguments parsed
// against the schema into boxed values, the GIL released and taken back. These functions are
// CPython fast-call functions that unpack their arguments and call the registered op through the
// C++ dispatcher's typed handle. Below that call everything is what torch.ops runs: the same
// kernels, checks and error messages (torch's own translation of c10 errors into Python ones),
// dispatch modes, profiler records, the tracer. Like upstream's pybind11 functions they keep the
// GIL during the launch.
//
// A call they do not take as it is (keyword arguments, an argument that is not exactly a tensor,
// None or a bool, a tensor subclass, a __torch_function__ mode on) is passed to the Python function
// the entry was bound to (bind(), from causal_conv1d/_core.py): the op overload for the updates,
// the overload after kernel_layout for the forward (which so takes x in any strides, as the compat
// module's forward does). Those answer it as they would have answered it directly: behaviour never
// depends on the entry. Dynamo does not trace these functions: causal_conv1d/_core.py calls the
// overloads while it traces.
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <Python.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <optional>
#include <string>

#include "../torch/op_names.h"

namespace {

using causal_conv1d::torch_ops::OpName;
using OptTensor = std::optional<at::Tensor>;

using FwdSig = void(const at::Tensor&, const at::Tensor&, const OptTensor&, const OptTensor&, const OptTensor&,
                    const at::Tensor&, const OptTensor&, bool);
using UpdateSig = void(const at::Tensor&, const at::Tensor&, const at::Tensor&, const OptTensor&, const at::Tensor&,
                       bool, const OptTensor&, const OptTensor&);
using UpdateFunctionalSig = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const OptTensor&, bool,
                                       const OptTensor&, const OptTensor&);

// An entry: the op's typed dispatcher handle and the Python callable that answers every call the
// fast path does not take. Both are set by bind(); a function called before it raises.
template <typename Sig>
struct Entry {
  std::optional<c10::TypedOperatorHandle<Sig>> op;
  PyObject* fallback = nullptr;  // the fallback: a strong reference, kept until the next bind()
};

Entry<FwdSig> g_fwd;
Entry<UpdateSig> g_update;
Entry<UpdateFunctionalSig> g_update_functional;

// Argument readers: false when the object is not of the exact form the fast path takes (the
// overload then gets the call, and reports what is wrong with it).
bool read_tensor(PyObject* o, const at::Tensor*& t) {
  if (!THPVariable_CheckExact(o)) return false;  // torch.Tensor or nn.Parameter, no subclass
  t = &THPVariable_Unpack(o);
  return true;
}

bool read_opt_tensor(PyObject* o, OptTensor& t) {
  if (o == Py_None) return true;  // t is empty
  if (!THPVariable_CheckExact(o)) return false;
  t = THPVariable_Unpack(o);
  return true;
}

bool read_bool(PyObject* o, bool& b) {
  if (o != Py_True && o != Py_False) return false;
  b = o == Py_True;
  return true;
}

// Whether a call with these argument counts may take the fast path at all: positional only, the
// schema's count, and no __torch_function__ mode (the overload would hand the call to it).
bool plain_call(Py_ssize_t nargs, PyObject* kwnames, Py_ssize_t expected) {
  return kwnames == nullptr && nargs == expected && !at::impl::torch_function_mode_enabled();
}

template <typename Sig>
PyObject* call_fallback(const Entry<Sig>& e, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return PyObject_Vectorcall(e.fallback, args, static_cast<size_t>(nargs), kwnames);
}

template <typename Sig>
bool check_bound(const Entry<Sig>& e, const char* name) {
  if (e.fallback != nullptr) return true;
  PyErr_Format(PyExc_RuntimeError, "causal_conv1d._eager.%s called before bind() (causal_conv1d._core binds it)", name);
  return false;
}

// Whether causal_conv1d/_core.py's kernel_layout would return x as it is (stride 1 along seqlen or
// along dim, or not 3-D, which the op reports): the forward's fast path needs no layout decided.
// Any other x goes to the bound fallback, which lays it out with kernel_layout itself.
bool laid_out(const at::Tensor& x) { return x.dim() != 3 || x.stride(2) == 1 || x.stride(1) == 1; }

// fwd(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu_activation) -> None
PyObject* fwd(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  HANDLE_TH_ERRORS
  if (!check_bound(g_fwd, "fwd")) return nullptr;
  const at::Tensor *x = nullptr, *weight = nullptr, *out = nullptr;
  OptTensor bias, seq_idx, initial_states, final_states_out;
  bool silu = false;
  if (plain_call(nargs, kwnames, 8) && read_tensor(args[0], x) && laid_out(*x) && read_tensor(args[1], weight) &&
      read_opt_tensor(args[2], bias) && read_opt_tensor(args[3], seq_idx) && read_opt_tensor(args[4], initial_states) &&
      read_tensor(args[5], out) && read_opt_tensor(args[6], final_states_out) && read_bool(args[7], silu)) {
    g_fwd.op->call(*x, *weight, bias, seq_idx, initial_states, *out, final_states_out, silu);
    Py_RETURN_NONE;
  }
  return call_fallback(g_fwd, args, nargs, kwnames);
  END_HANDLE_TH_ERRORS
}

// update(x, conv_state, weight, bias, out, silu_activation, cache_seqlens, conv_state_indices) -> None
PyObject* update(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  HANDLE_TH_ERRORS
  if (!check_bound(g_update, "update")) return nullptr;
  const at::Tensor *x = nullptr, *conv_state = nullptr, *weight = nullptr, *out = nullptr;
  OptTensor bias, cache_seqlens, conv_state_indices;
  bool silu = false;
  if (plain_call(nargs, kwnames, 8) && read_tensor(args[0], x) && read_tensor(args[1], conv_state) &&
      read_tensor(args[2], weight) && read_opt_tensor(args[3], bias) && read_tensor(args[4], out) &&
      read_bool(args[5], silu) && read_opt_tensor(args[6], cache_seqlens) &&
      read_opt_tensor(args[7], conv_state_indices)) {
    g_update.op->call(*x, *conv_state, *weight, bias, *out, silu, cache_seqlens, conv_state_indices);
    Py_RETURN_NONE;
  }
  return call_fallback(g_update, args, nargs, kwnames);
  END_HANDLE_TH_ERRORS
}

// update_functional(x, conv_state, weight, bias, silu_activation, cache_seqlens, conv_state_indices) -> out
PyObject* update_functional(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  HANDLE_TH_ERRORS
  if (!check_bound(g_update_functional, "update_functional")) return nullptr;
  const at::Tensor *x = nullptr, *conv_state = nullptr, *weight = nullptr;
  OptTensor bias, cache_seqlens, conv_state_indices;
  bool silu = false;
  if (plain_call(nargs, kwnames, 7) && read_tensor(args[0], x) && read_tensor(args[1], conv_state) &&
      read_tensor(args[2], weight) && read_opt_tensor(args[3], bias) && read_bool(args[4], silu) &&
      read_opt_tensor(args[5], cache_seqlens) && read_opt_tensor(args[6], conv_state_indices)) {
    return THPVariable_Wrap(
        g_update_functional.op->call(*x, *conv_state, *weight, bias, silu, cache_seqlens, conv_state_indices));
  }
  return call_fallback(g_update_functional, args, nargs, kwnames);
  END_HANDLE_TH_ERRORS
}

template <typename Sig>
void bind_entry(Entry<Sig>& e, const OpName& name, PyObject* fallback) {
  const std::string qualified = std::string("causal_conv1d::") + name.registered;
  e.op = c10::Dispatcher::singleton().findSchemaOrThrow(qualified.c_str(), "").typed<Sig>();
  Py_INCREF(fallback);
  Py_XDECREF(e.fallback);
  e.fallback = fallback;
}

// bind(fwd, update, update_functional): after the op library is loaded, the Python callables the
// functions fall back to (the ops' overloads, the forward's after kernel_layout).
PyObject* bind(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (nargs != 3) {
    PyErr_Format(PyExc_TypeError, "bind() takes the fwd, update and update_functional fallbacks, got %zd arguments",
                 nargs);
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    if (!PyCallable_Check(args[i])) {
      PyErr_Format(PyExc_TypeError, "bind(): argument %zd is not callable", i);
      return nullptr;
    }
  }
  using namespace causal_conv1d::torch_ops;
  bind_entry(g_fwd, kFwdOp, args[0]);
  bind_entry(g_update, kUpdateOp, args[1]);
  bind_entry(g_update_functional, kUpdateFunctionalOp, args[2]);
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyMethodDef methods[] = {
    {"fwd", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fwd)), METH_FASTCALL | METH_KEYWORDS,
     "fwd(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu_activation): "
     "torch.ops.causal_conv1d.fwd's eager entry"},
    {"update", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&update)), METH_FASTCALL | METH_KEYWORDS,
     "update(x, conv_state, weight, bias, out, silu_activation, cache_seqlens, conv_state_indices): "
     "torch.ops.causal_conv1d.update's eager entry"},
    {"update_functional", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&update_functional)),
     METH_FASTCALL | METH_KEYWORDS,
     "update_functional(x, conv_state, weight, bias, silu_activation, cache_seqlens, conv_state_indices) -> out: "
     "torch.ops.causal_conv1d.update_functional's eager entry"},
    {"bind", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&bind)), METH_FASTCALL,
     "bind(fwd, update, update_functional): what the entries fall back to (causal_conv1d/_core.py binds them)"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {.m_base = PyModuleDef_HEAD_INIT,
                          .m_name = "_eager",
                          .m_doc = "Eager entries to the causal_conv1d ops (csrc/python/eager.cpp).",
                          .m_size = -1,
                          .m_methods = methods};

}  // namespace

PyMODINIT_FUNC PyInit__eager() { return PyModule_Create(&module_def); }
