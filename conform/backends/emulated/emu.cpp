// The emulated accelerator: a PrivateUse1 device ("emu") that behaves like a real one on a
// CPU-only machine. Memory is host memory, but everything else follows the rules of real
// devices, so that conform's tests exercise the paths a Mac or a GPU takes:
//
//  * storage from an allocator registered for PrivateUse1 (so detach(), views and copies keep
//    their data), and a device guard and hooks, as PyTorch's own open-registration extension
//    (test/cpp_extensions/open_registration_extension/{pytorch_openreg/csrc/OpenRegMem.cpp,
//    OpenRegHooks.cpp, torch_openreg/csrc/aten/native/Minimal.cpp}) registers them;
//  * native kernels for the basics and a few compute ops, and a boxed fallback for every other
//    op that behaves like MPS's (aten/src/ATen/mps/MPSFallback.mm): NotImplementedError unless
//    CONFORM_EMU_FALLBACK=1 (MPS: PYTORCH_ENABLE_MPS_FALLBACK=1), then at::native::cpu_fallback
//    with a TORCH_WARN_ONCE;
//  * dtypes as MPS on macOS 13 (aten/src/ATen/mps/EmptyTensor.cpp and
//    native/mps/OperationUtils.mm): float64 rejected always, bfloat16 and complex before
//    macOS 14, all as TypeErrors with MPS's words;
//  * a runtime that does not survive fork() once initialised (CUDA: torch/csrc/cuda/Module.cpp's
//    pthread_atfork handler and torch/cuda/__init__.py's "Cannot re-initialize CUDA in forked
//    subprocess"), initialised lazily by the first real use, not by loading the library;
//  * a sticky error state after a simulated device-side assert (CUDA's c10 error text "CUDA
//    error: device-side assert triggered"): every later device op in the process fails.

#include <torch/extension.h>

#include <ATen/EmptyTensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided_cpu_dispatch.h>
#include <ATen/ops/set_cpu_dispatch.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>
#include <torch/library.h>

#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

namespace emu {
namespace {

// -- runtime state ------------------------------------------------------------------------

std::atomic<bool> g_initialized{false};
bool g_bad_fork = false;  // set in a forked child of an initialised process, only there
std::atomic<bool> g_sticky{false};
std::string g_sticky_what;

void on_fork_child() {
  // As CUDA: a child forked after the runtime is initialised may not use it, ever.
  if (g_initialized.load()) {
    g_bad_fork = true;
  }
}

// Registered when the library loads; loading alone does not initialise the runtime.
const int g_atfork_registered = pthread_atfork(nullptr, nullptr, &on_fork_child);

// Every device operation starts here: the first one initialises the runtime.
void lazy_init() {
  TORCH_CHECK(
      !g_bad_fork,
      "Cannot re-initialize emu in forked subprocess. To use emu with multiprocessing, "
      "you must use the 'spawn' start method");
  if (g_sticky.load()) {
    TORCH_CHECK(false, "emu error: device-side assert triggered\n", g_sticky_what,
                "Device errors are sticky: the emu runtime is unusable in this process.");
  }
  g_initialized.store(true);
}

// A kernel found an error only the device can see (an index out of range): the context is
// poisoned, as CUDA's is after a device-side assert.
[[noreturn]] void device_assert(const std::string& what) {
  g_sticky_what = what + "\n";
  g_sticky.store(true);
  TORCH_CHECK(false, "emu error: device-side assert triggered\n", g_sticky_what,
              "Device errors are sticky: the emu runtime is unusable in this process.");
}

// The emulated macOS version (major): dtype support follows it, as MPS's does.
int macos_major() {
  const char* v = std::getenv("CONFORM_EMU_MACOS");
  if (!v || !*v) return 13;
  return std::atoi(v);
}

// EmptyTensor.cpp's MPS_ERROR_DOUBLE_NOT_SUPPORTED and bfloat16 check; OperationUtils.mm's
// checkSupportsComplex. (MPS raises the complex one when a kernel meets the dtype; the emulator
// raises it when such a tensor is made, which every kernel must do.)
void check_dtype(c10::ScalarType dtype) {
  TORCH_CHECK_TYPE(dtype != c10::ScalarType::Double,
                   "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. "
                   "Please use float32 instead.");
  TORCH_CHECK_TYPE(dtype != c10::ScalarType::ComplexDouble && !c10::isFloat8Type(dtype),
                   "Trying to convert ", dtype, " to the MPS backend but it does not have support for that dtype.");
  TORCH_CHECK_TYPE(dtype != c10::ScalarType::BFloat16 || macos_major() >= 14,
                   "MPS BFloat16 is only supported on MacOS 14 or newer");
  TORCH_CHECK_TYPE(!c10::isComplexType(dtype) || macos_major() >= 14,
                   "MPS complex types are only supported on MacOS 14.0 or newer.");
}

// -- memory -------------------------------------------------------------------------------

void emu_free(void* ptr) {
  c10::free_cpu(ptr);
}

struct EmuAllocator final : at::Allocator {
  at::DataPtr allocate(size_t nbytes) override {
    lazy_init();
    void* data = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    return {data, data, &emu_free, c10::Device(c10::DeviceType::PrivateUse1, 0)};
  }
  at::DeleterFnPtr raw_deleter() const override {
    return &emu_free;
  }
  void copy_data(void* dest, const void* src, std::size_t count) const final {
    default_copy_data(dest, src, count);
  }
};

EmuAllocator g_allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

// A CPU tensor viewing the same memory as an emu tensor: CPU kernels compute "on the device".
at::Tensor cpu_alias(const at::Tensor& t) {
  if (!t.defined() || !t.is_privateuseone()) return t;
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
}

constexpr c10::DispatchKeySet kEmuKeys(c10::DispatchKey::PrivateUse1);

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype_opt,
                               std::optional<c10::Layout> layout_opt, std::optional<c10::Device> device_opt,
                               std::optional<bool> pin_memory_opt,
                               std::optional<c10::MemoryFormat> memory_format_opt) {
  lazy_init();
  const auto dtype = c10::dtype_or_default(dtype_opt);
  check_dtype(dtype);
  TORCH_CHECK_NOT_IMPLEMENTED(c10::layout_or_default(layout_opt) == c10::Layout::Strided,
                              "only strided tensors are supported on emu");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory_opt), "Pin memory can only be on CPU");
  return at::detail::empty_generic(size, &g_allocator, kEmuKeys, dtype, memory_format_opt);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype_opt,
                         std::optional<c10::Layout> layout_opt, std::optional<c10::Device> device_opt,
                         std::optional<bool> pin_memory_opt) {
  lazy_init();
  const auto dtype = c10::dtype_or_default(dtype_opt);
  check_dtype(dtype);
  TORCH_CHECK_NOT_IMPLEMENTED(c10::layout_or_default(layout_opt) == c10::Layout::Strided,
                              "only strided tensors are supported on emu");
  return at::detail::empty_strided_generic(size, stride, &g_allocator, kEmuKeys, dtype);
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> storage_offset) {
  lazy_init();
  return at::cpu::as_strided_symint(self, size, stride, std::move(storage_offset));
}

const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  lazy_init();
  return at::native::resize_(self, C10_AS_INTARRAYREF_SLOW(size), memory_format);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  lazy_init();
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  lazy_init();
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  lazy_init();
  // only the device's side of a copy must have a dtype the device supports
  if (self.is_privateuseone()) check_dtype(self.scalar_type());
  if (dst.is_privateuseone()) check_dtype(dst.scalar_type());
  at::Tensor dst_cpu = cpu_alias(dst);
  at::native::copy_(dst_cpu, cpu_alias(self), false);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  lazy_init();
  at::native::resize_(dst, self.sizes(), std::nullopt);
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  lazy_init();
  return at::native::_local_scalar_dense_cpu(cpu_alias(self));
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  lazy_init();
  return at::native::set_tensor_(self, source);
}

at::Tensor& set_source_storage(at::Tensor& self, at::Storage source) {
  lazy_init();
  return at::native::set_(self, source);
}

at::Tensor& set_source_storage_offset(at::Tensor& result, at::Storage storage, int64_t storage_offset,
                                      c10::IntArrayRef size, c10::IntArrayRef stride) {
  lazy_init();
  return at::cpu::set_(result, storage, storage_offset, size, stride);
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  lazy_init();
  cpu_alias(self).fill_(value);
  return self;
}

at::Tensor& zero_(at::Tensor& self) {
  lazy_init();
  cpu_alias(self).zero_();
  return self;
}

// A CPU result as a new emu tensor with the same strides where they are dense.
at::Tensor to_emu(const at::Tensor& cpu) {
  at::Tensor out = cpu.is_non_overlapping_and_dense()
      ? empty_strided(cpu.sizes(), cpu.strides(), cpu.scalar_type(), std::nullopt, std::nullopt, std::nullopt)
      : empty_memory_format(cpu.sizes(), cpu.scalar_type(), std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  cpu_alias(out).copy_(cpu);
  return out;
}

// -- native compute kernels ----------------------------------------------------------------

// A boxed kernel that computes on the device's own memory: tensor arguments become CPU aliases,
// the CPU kernel runs, and results come back as emu tensors (or, for in-place and out= ops,
// as the emu argument the result aliases).
void native_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  lazy_init();
  const auto& schema = op.schema();
  const auto num_args = schema.arguments().size();
  auto args = torch::jit::last(*stack, num_args);
  std::vector<c10::IValue> originals(args.begin(), args.end());
  for (size_t i = 0; i < num_args; ++i) {
    c10::IValue& v = (*stack)[stack->size() - num_args + i];
    // CPU tensors (wrapped Python scalars are float64 ones) are fine; device tensors are checked
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().is_privateuseone()) {
      check_dtype(v.toTensor().scalar_type());
      v = cpu_alias(v.toTensor());
    }
  }
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  const auto num_returns = schema.returns().size();
  for (size_t r = 0; r < num_returns; ++r) {
    c10::IValue& v = (*stack)[stack->size() - num_returns + r];
    if (!v.isTensor()) continue;
    const auto* alias = schema.returns()[r].alias_info();
    bool mapped = false;
    if (alias) {
      for (size_t i = 0; i < num_args; ++i) {
        const auto* arg_alias = schema.arguments()[i].alias_info();
        if (arg_alias && arg_alias->beforeSets() == alias->beforeSets() && originals[i].isTensor()) {
          v = originals[i];
          mapped = true;
          break;
        }
      }
    }
    if (!mapped) v = to_emu(v.toTensor());
  }
}

// Index kernels check their indices on the device: a bad one is a device-side assert.
void check_indices(const at::Tensor& index, int64_t size, const char* op) {
  at::Tensor idx = cpu_alias(index);
  if (idx.numel() == 0) return;
  const int64_t lo = idx.min().item<int64_t>();
  const int64_t hi = idx.max().item<int64_t>();
  if (lo < -size || hi >= size) {
    device_assert(std::string(op) + ": index out of bounds (size " + std::to_string(size) + ", index " +
                  std::to_string(lo < -size ? lo : hi) + ")");
  }
}

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  lazy_init();
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  check_indices(index, self.dim() ? self.size(d) : 1, "index_select");
  return to_emu(at::index_select(cpu_alias(self), dim, cpu_alias(index)));
}

at::Tensor gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad) {
  lazy_init();
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  check_indices(index, self.dim() ? self.size(d) : 1, "gather");
  return to_emu(at::gather(cpu_alias(self), dim, cpu_alias(index), sparse_grad));
}

// -- the fallback, as MPS's ---------------------------------------------------------------

bool fallback_enabled() {
  // MPS reads PYTORCH_ENABLE_MPS_FALLBACK once, when its library registers; the emulator reads
  // its variable at every call so that one test process can run both ways.
  const char* v = std::getenv("CONFORM_EMU_FALLBACK");
  return v && *v && std::atoi(v) != 0;
}

void emu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  lazy_init();
  TORCH_CHECK_NOT_IMPLEMENTED(
      fallback_enabled(), "The operator '", op.schema().operator_name(),
      "' is not currently implemented for the emu device. If you want this op to be considered for addition "
      "please comment on https://github.com/pytorch/pytorch/issues/141287 and mention use-case, that resulted in "
      "missing op. As a temporary fix, you can set the environment variable `CONFORM_EMU_FALLBACK=1` to use the "
      "CPU as a fallback for this op. WARNING: this will be slower than running natively on emu.");
  TORCH_WARN_ONCE("The operator '", op.schema().operator_name(), "' is not currently supported ",
                  "on the emu backend and will fall back to run on the CPU.",
                  " This may have performance implications.");
  at::native::cpu_fallback(op, stack);
}

// -- device guard and hooks ----------------------------------------------------------------

struct EmuGuardImpl final : c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType static_type = c10::DeviceType::PrivateUse1;
  c10::DeviceType type() const override { return static_type; }
  c10::Device exchangeDevice(c10::Device) const override { return c10::Device(static_type, 0); }
  c10::Device getDevice() const override { return c10::Device(static_type, 0); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.index() <= 0, "emu has one device; got index ", static_cast<int>(d.index()));
  }
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const noexcept override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream getDefaultStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override { return s; }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override { lazy_init(); }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void synchronizeEvent(void*) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, EmuGuardImpl);

struct EmuGenerator : at::CPUGeneratorImpl {
  EmuGenerator() {
    device_ = c10::Device(c10::DeviceType::PrivateUse1, 0);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }
};

struct EmuHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex) const override {
    static at::Generator gen = at::make_generator<EmuGenerator>();
    return gen;
  }
  at::Generator getNewGenerator(c10::DeviceIndex) const override { return at::make_generator<EmuGenerator>(); }
  at::Device getDeviceFromPtr(void*) const override { return c10::Device(c10::DeviceType::PrivateUse1, 0); }
  bool isPinnedPtr(const void*) const override { return false; }
  at::Allocator* getPinnedMemoryAllocator() const override { return c10::GetCPUAllocator(); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return g_initialized.load() && !g_bad_fork; }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    lazy_init();
    at::native::resize_bytes_cpu(storage.unsafeGetStorageImpl(), newsize);
  }
};

const int g_hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new EmuHooks());
  return 0;
}();

}  // namespace

// Ops computed natively on the device; every other op reaches the fallback. A few
// differentiable ones (abs, tanh) have backward formulas that need ops the device lacks
// (sgn, tanh_backward): their forward is native, their backward falls back.
const char* const kNativeComputeOps[] = {
    "add.Tensor", "add_.Tensor", "sub.Tensor", "sub_.Tensor", "mul.Tensor", "mul_.Tensor",
    "div.Tensor", "div_.Tensor", "neg", "neg_", "abs", "abs_", "tanh", "tanh_", "exp",
    "eq.Tensor", "eq.Scalar", "ne.Tensor", "ne.Scalar", "clone", "sum.dim_IntList",
};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", as_strided);
  m.impl("resize_", resize_);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("view", view);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Storage_storage_offset", set_source_storage_offset);
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("zero_", zero_);
  m.impl("index_select", index_select);
  m.impl("gather", gather);
  for (const char* name : kNativeComputeOps) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&native_kernel>());
  }
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&emu_fallback>());
}

}  // namespace emu

// -- Python API ---------------------------------------------------------------------------

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("is_initialized", [] { return emu::g_initialized.load() && !emu::g_bad_fork; },
        "Whether the runtime was initialised in this process (False in a forked child).");
  m.def("is_in_bad_fork", [] { return emu::g_bad_fork; });
  m.def("init", [] { emu::lazy_init(); }, "Initialise the runtime (raises in a poisoned process).");
  m.def("synchronize", [] { emu::lazy_init(); });
  m.def("is_sticky", [] { return emu::g_sticky.load(); });
  m.def("trigger_device_assert", [] { emu::device_assert("triggered by conform.backends.emulated.trigger_device_assert()"); },
        "Simulate a device-side assert: every later device op in this process raises.");
}
