// causal_conv1d._eager: the eager entry from Python to the ops that decode loops and fused layers
// call once per step (fwd into a given out, bwd into given buffers, update into a given out, update
// returning out).
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
// module's forward does), and for the backward the overload after kernel_layout, match_layout and
// deterministic_mode (the fast path takes x and dout already in one kernel layout, and reads the
// deterministic mode as deterministic_mode does). Those answer it as they would have answered it
// directly: behaviour never depends on the entry. Dynamo does not trace these functions:
// causal_conv1d/_core.py calls the overloads while it traces.
#include <ATen/Context.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <Python.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "../torch/op_names.h"

namespace {

using causal_conv1d::torch_ops::OpName;
using OptTensor = std::optional<at::Tensor>;

using FwdSig = void(const at::Tensor&, const at::Tensor&, const OptTensor&, const OptTensor&, const OptTensor&,
                    const at::Tensor&, const OptTensor&, bool);
using BwdSig = void(const at::Tensor&, const at::Tensor&, const OptTensor&, const at::Tensor&, const OptTensor&,
                    const OptTensor&, const OptTensor&, const at::Tensor&, const at::Tensor&, const OptTensor&,
                    const OptTensor&, bool, bool);
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
Entry<BwdSig> g_bwd;
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

// Whether match_layout(t, channel_last) (causal_conv1d/_core.py) would return t as it is: stride 1
// along the dim x has it (or that dim of size 1), or not 3-D (the op reports it). channel_last as
// kernel_layout gives it for a laid-out x.
bool channel_last_of(const at::Tensor& x) { return x.dim() == 3 && x.stride(2) != 1 && x.size(2) > 1; }
bool in_layout(const at::Tensor& t, bool channel_last) {
  if (t.dim() != 3) return true;
  return channel_last ? t.size(1) <= 1 || t.stride(1) == 1 : t.size(2) <= 1 || t.stride(2) == 1;
}

// deterministic_mode() (causal_conv1d/_core.py): CAUSAL_CONV1D_DETERMINISTIC=1 on, =0 off, unset or
// empty torch.use_deterministic_algorithms'. false for any other value: the fallback then raises
// deterministic_mode's error. (os.environ's assignments reach getenv: CPython calls putenv.)
bool read_deterministic(bool& d) {
  const char* env = std::getenv("CAUSAL_CONV1D_DETERMINISTIC");
  if (env == nullptr || env[0] == '\0') {
    d = at::globalContext().deterministicAlgorithms();
    return true;
  }
  if (std::strcmp(env, "0") != 0 && std::strcmp(env, "1") != 0) return false;
  d = env[0] == '1';
  return true;
}

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

// bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight, dbias,
//     dinitial_states, silu_activation) -> None: the compat module's 12-argument form (the op's
//     deterministic flag read here)
PyObject* bwd(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  HANDLE_TH_ERRORS
  if (!check_bound(g_bwd, "bwd")) return nullptr;
  const at::Tensor *x = nullptr, *weight = nullptr, *dout = nullptr, *dx = nullptr, *dweight = nullptr;
  OptTensor bias, seq_idx, initial_states, dfinal_states, dbias, dinitial_states;
  bool silu = false, deterministic = false;
  if (plain_call(nargs, kwnames, 12) && read_tensor(args[0], x) && laid_out(*x) && read_tensor(args[1], weight) &&
      read_opt_tensor(args[2], bias) && read_tensor(args[3], dout) && in_layout(*dout, channel_last_of(*x)) &&
      read_opt_tensor(args[4], seq_idx) && read_opt_tensor(args[5], initial_states) &&
      read_opt_tensor(args[6], dfinal_states) && read_tensor(args[7], dx) && read_tensor(args[8], dweight) &&
      read_opt_tensor(args[9], dbias) && read_opt_tensor(args[10], dinitial_states) && read_bool(args[11], silu) &&
      read_deterministic(deterministic)) {
    g_bwd.op->call(*x, *weight, bias, *dout, seq_idx, initial_states, dfinal_states, *dx, *dweight, dbias,
                   dinitial_states, silu, deterministic);
    Py_RETURN_NONE;
  }
  return call_fallback(g_bwd, args, nargs, kwnames);
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

// bind(fwd, update, update_functional, bwd): after the op library is loaded, the Python callables
// the functions fall back to (the ops' overloads; the forward's after kernel_layout, the backward's
// after the layouts and the deterministic mode are decided).
PyObject* bind(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (nargs != 4) {
    PyErr_Format(PyExc_TypeError,
                 "bind() takes the fwd, update, update_functional and bwd fallbacks, got %zd arguments", nargs);
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
  bind_entry(g_bwd, kBwdOp, args[3]);
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyMethodDef methods[] = {
    {"fwd", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fwd)), METH_FASTCALL | METH_KEYWORDS,
     "fwd(x, weight, bias, seq_idx, initial_states, out, final_states_out, silu_activation): "
     "torch.ops.causal_conv1d.fwd's eager entry"},
    {"bwd", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&bwd)), METH_FASTCALL | METH_KEYWORDS,
     "bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight, dbias, dinitial_states, "
     "silu_activation): torch.ops.causal_conv1d.bwd's eager entry (the deterministic mode read as "
     "causal_conv1d._core.deterministic_mode reads it)"},
    {"update", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&update)), METH_FASTCALL | METH_KEYWORDS,
     "update(x, conv_state, weight, bias, out, silu_activation, cache_seqlens, conv_state_indices): "
     "torch.ops.causal_conv1d.update's eager entry"},
    {"update_functional", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&update_functional)),
     METH_FASTCALL | METH_KEYWORDS,
     "update_functional(x, conv_state, weight, bias, silu_activation, cache_seqlens, conv_state_indices) -> out: "
     "torch.ops.causal_conv1d.update_functional's eager entry"},
    {"bind", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&bind)), METH_FASTCALL,
     "bind(fwd, update, update_functional, bwd): what the entries fall back to (causal_conv1d/_core.py binds "
     "them)"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {.m_base = PyModuleDef_HEAD_INIT,
                          .m_name = "_eager",
                          .m_doc = "Eager entries to the causal_conv1d ops (csrc/python/eager.cpp).",
                          .m_size = -1,
                          .m_methods = methods};

}  // namespace

PyMODINIT_FUNC PyInit__eager() { return PyModule_Create(&module_def); }
