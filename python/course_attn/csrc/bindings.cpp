// The PyTorch side of the course's GPU kernels: checks torch tensors, then hands their device
// pointers to the labs' C++ APIs (include/course/lab4_cuda.hpp, lab5_tensor_core.hpp,
// lab6_decoding.hpp, lab6_paged.hpp, lab7_backward_gpu.hpp, lab8_hopper.hpp, lab9_hopper_backward.hpp) on PyTorch's
// current stream, with
// every output and workspace taken from PyTorch's caching allocator. Labs 8 and 9 are bound only
// where _extension.py compiled them (COURSE_ATTN_HAVE_LAB8, _LAB9: their sm_90a libraries were
// built and linked).
//
// Nothing here computes attention: every number comes from the lab code compiled beside this
// file (solutions/ by default, your labs/ with COURSE_ATTN_SOURCES=labs; see _extension.py).
// The Python functions in course_attn/ are the documented interface; these are their engine.
//
// Errors: a bad argument is the caller's mistake and must come back as a Python exception,
// never a crash. The checks below raise TypeError (a dtype the kernel does not take) or
// ValueError (device, layout, shapes); what they let through, the lab checks itself, and its
// course::BadInput becomes a ValueError with the lab's own message. A lab function you have not
// written yet (course::NotImplemented) becomes NotImplementedError. A failed CUDA call is a
// std::runtime_error from the lab: RuntimeError.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "choices.hpp"  // the ints Python passes for a version or a backward kernel
#include "course/attention.hpp"  // each forward lab's ForwardRules: the dtypes it takes
#include "course/errors.hpp"
#include "course/gpu.hpp"
#include "course/lab4_cuda.hpp"
#include "course/lab5_tensor_core.hpp"
#include "course/lab6_decoding.hpp"
#include "course/lab6_paged.hpp"
#include "course/lab7_backward_gpu.hpp"
#include "course/lab8_hopper.hpp"
#include "course/lab9_hopper_backward.hpp"

#ifndef COURSE_ATTN_HAVE_LAB8
#define COURSE_ATTN_HAVE_LAB8 0
#endif
#ifndef COURSE_ATTN_HAVE_LAB9
#define COURSE_ATTN_HAVE_LAB9 0
#endif

namespace py = pybind11;

namespace {

using Tensors2 = std::tuple<at::Tensor, at::Tensor>;
using Tensors3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// pybind11 turns these two into Python's ValueError and TypeError.
[[noreturn]] void bad_value(const std::string& function, const std::string& what) {
  throw py::value_error("course_attn." + function + ": " + what);
}
[[noreturn]] void bad_type(const std::string& function, const std::string& what) {
  throw py::type_error("course_attn." + function + ": " + what);
}

// "torch.bfloat16", as a Python user writes it.
std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "torch.float32";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kHalf: return "torch.float16";
    case at::kDouble: return "torch.float64";
    case at::kInt: return "torch.int32";  // c10 would say "Int" and "Long"
    case at::kLong: return "torch.int64";
    default: return std::string("torch.") + c10::toString(t);
  }
}

std::string sizes_text(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

// The labs take fp32, bf16 or fp16 storage (course::DType); each lab only some of them.
course::DType course_dtype(const at::Tensor& t, const std::string& function, const std::string& lab,
                           const std::vector<at::ScalarType>& accepted) {
  std::string names;
  for (const at::ScalarType s : accepted) {
    if (t.scalar_type() == s) {
      if (s == at::kFloat) return course::DType::fp32;
      if (s == at::kBFloat16) return course::DType::bf16;
      return course::DType::fp16;
    }
    names += (names.empty() ? "" : " and ") + dtype_name(s);
  }
  bad_type(function, lab + " takes " + names + ", not " + dtype_name(t.scalar_type()));
}

// What every tensor handed to a kernel must be: on a CUDA device, 4-D [B, H, N, d] (or the
// given rank), dense row-major (the kernels index with the shape alone, never with strides), and
// 16-byte aligned (the kernels load 16 bytes at a time; a view at an odd offset is not).
void check_tensor(const at::Tensor& t, const char* name, const std::string& function, int64_t rank = 4) {
  if (!t.defined()) bad_value(function, std::string(name) + " is not a tensor");
  if (!t.is_cuda()) {
    bad_value(function, std::string(name) + " must be a CUDA tensor, got one on " + t.device().str());
  }
  if (t.dim() != rank) {
    bad_value(function, std::string(name) + " must have " + std::to_string(rank) + " dimensions" +
                            (rank == 4 ? " [B, H, N, d]" : "") + ", got " + sizes_text(t));
  }
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (t.size(i) < 1) {
      bad_value(function, std::string(name) + " has an empty dimension: " + sizes_text(t) +
                              " (attention needs at least one query and one key)");
    }
    if (t.size(i) > std::numeric_limits<int>::max()) {
      bad_value(function, std::string(name) + " is too large for the labs' int sizes: " + sizes_text(t));
    }
  }
  if (!t.is_contiguous()) {
    bad_value(function, std::string(name) + " is not contiguous (a transposed or sliced view); pass " +
                            name + ".contiguous()");
  }
  if (reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 != 0) {
    bad_value(function, std::string(name) + " does not start on a 16-byte boundary (a view at an offset "
                            "into another tensor); pass " + name + ".clone()");
  }
}

void check_same_device(const at::Tensor& a, const at::Tensor& b, const char* name, const std::string& function) {
  if (a.device() != b.device()) {
    bad_value(function, std::string(name) + " is on " + b.device().str() + " but q is on " + a.device().str());
  }
}

void check_same_dtype(const at::Tensor& a, const at::Tensor& b, const char* name, const std::string& function) {
  if (a.scalar_type() != b.scalar_type()) {
    bad_type(function, std::string(name) + " is " + dtype_name(b.scalar_type()) + " but q is " +
                           dtype_name(a.scalar_type()));
  }
}

// The checks every call makes of its query and its keys and values (named k_name and v_name: k
// and v, or a decode's k_cache and v_cache): each a kernel's tensor, all three on q's device and
// of q's dtype, the keys and values of one shape.
void check_query_keys_values(const at::Tensor& q, const at::Tensor& k, const char* k_name, const at::Tensor& v,
                             const char* v_name, const std::string& function) {
  check_tensor(q, "q", function);
  check_tensor(k, k_name, function);
  check_tensor(v, v_name, function);
  check_same_device(q, k, k_name, function);
  check_same_device(q, v, v_name, function);
  check_same_dtype(q, k, k_name, function);
  check_same_dtype(q, v, v_name, function);
  if (k.sizes() != v.sizes()) {
    bad_value(function, std::string(k_name) + " and " + v_name + " must have the same shape, got " +
                            sizes_text(k) + " and " + sizes_text(v));
  }
}

// q [B, H, Nq, d], k and v [B, H, Nk, d], all on one device, of one dtype.
course::AttentionShape attention_shape(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                       const std::string& function) {
  check_query_keys_values(q, k, "k", v, "v", function);
  if (q.size(0) != k.size(0) || q.size(1) != k.size(1) || q.size(3) != k.size(3)) {
    bad_value(function, "q " + sizes_text(q) + " and k " + sizes_text(k) +
                            " must agree in B, H and d (q is [B, H, Nq, d], k and v [B, H, Nk, d])");
  }
  course::AttentionShape shape;
  shape.B = static_cast<int>(q.size(0));
  shape.H = static_cast<int>(q.size(1));
  shape.Nq = static_cast<int>(q.size(2));
  shape.Nk = static_cast<int>(k.size(2));
  shape.d = static_cast<int>(q.size(3));
  return shape;
}

// The labs' scale convention: 0 means 1/sqrt(d) (the Python side passes 0 for scale=None).
float kernel_scale(double scale, const std::string& function) {
  const float s = static_cast<float>(scale);
  if (!std::isfinite(s) || s < 0.0f) {
    bad_value(function, "scale must be a finite number > 0 (or None for 1/sqrt(d)), got " + std::to_string(scale));
  }
  return s;
}

// PyTorch's current stream on the tensors' device: the kernels are queued behind whatever the
// caller queued there, and whatever the caller queues next waits for them. (The caching
// allocator assumes so too: a block freed on this stream is reused on this stream.)
cudaStream_t current_stream() { return at::cuda::getCurrentCUDAStream().stream(); }

// A scratch buffer from the caching allocator: no cudaMalloc, no synchronisation, returned to
// the pool when the tensor dies. The allocator's blocks are at least 512-byte aligned.
at::Tensor workspace(std::size_t bytes, const at::Tensor& like) {
  return at::empty({static_cast<int64_t>(bytes > 0 ? bytes : 1)}, like.options().dtype(at::kByte));
}

at::Tensor empty_lse(const course::AttentionShape& s, const at::Tensor& like) {
  return at::empty({s.B, s.H, s.Nq}, like.options().dtype(at::kFloat));
}

// The dtypes a forward lab takes, from its rules (course/attention.hpp), in torch's terms.
std::vector<at::ScalarType> torch_dtypes(const course::ForwardRules& rules) {
  std::vector<at::ScalarType> out;
  if (rules.fp32) out.push_back(at::kFloat);
  if (rules.bf16) out.push_back(at::kBFloat16);
  if (rules.fp16) out.push_back(at::kHalf);
  return out;
}

// The dtypes a backward lab takes: those of either of its kernels (lab 7: CUDA cores or tensor
// cores; which kernel goes with which dtype is the lab's own check, course::BadInput).
std::vector<at::ScalarType> torch_dtypes(const course::BackwardRules& rules) {
  course::ForwardRules either = rules.cuda_cores;
  either.fp32 = either.fp32 || rules.tensor_cores.fp32;
  either.bf16 = either.bf16 || rules.tensor_cores.bf16;
  either.fp16 = either.fp16 || rules.tensor_cores.fp16;
  return torch_dtypes(either);
}

// ---------------------------------------------------------------------------------------------
// The kernels.

// Labs 4, 5 and 8: one binding for the three, whose APIs agree --
// flash_attention_forward(Q, K, V, O, lse, dtype, shape, options), options with causal, scale and
// stream, and (labs 5 and 8) the version of the staircase -- and whose dtypes are their rules'.
// `version` is the int Python passes for a version's name (-1: the lab's best), read by
// choices.hpp.
template <int kLab, class Options, auto kForward, const course::ForwardRules& kRules>
Tensors2 tiled_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, double scale,
                       int64_t version) {
  const std::string lab = "lab" + std::to_string(kLab);
  const std::string f = "forward(kernel='" + lab + "')";
  const course::AttentionShape shape = attention_shape(q, k, v, f);
  const course::DType dtype = course_dtype(q, f, "lab " + std::to_string(kLab), torch_dtypes(kRules));
  const float tau = kernel_scale(scale, f);
  const c10::cuda::CUDAGuard device(q.device());  // the current device is the tensors' device
  at::Tensor o = at::empty(q.sizes(), q.options());
  at::Tensor lse = empty_lse(shape, q);
  Options options;
  options.causal = causal;
  options.scale = tau;
  options.stream = current_stream();
  course_attn::set_version(options, version, "course_attn." + f);
  kForward(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr<float>(), dtype, shape, options);
  return {o, lse};
}

Tensors2 lab6_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, double scale) {
  const std::string f = "forward(kernel='lab6')";
  const course::AttentionShape s = attention_shape(q, k, v, f);
  const course::DType dtype = course_dtype(q, f, "lab 6", {at::kFloat, at::kBFloat16});
  const float tau = kernel_scale(scale, f);
  const c10::cuda::CUDAGuard device(q.device());
  // Every batch element's cache is full: K and V hold exactly Nk keys (no seqlens_k).
  course::lab6::DecodeShape shape;
  shape.B = s.B;
  shape.H = s.H;
  shape.Nq = s.Nq;
  shape.Nk_max = s.Nk;
  shape.d = s.d;
  // The split count the library would choose on this device, and the workspace it needs (the
  // lab checks the shape first: Nq above 16 or an unsupported d is a BadInput here).
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int splits = course::lab6::choose_num_splits(shape, dtype, sms);
  const std::size_t bytes = course::lab6::split_kv_workspace_bytes(shape, dtype, splits);
  at::Tensor scratch = workspace(bytes, q);
  at::Tensor o = at::empty(q.sizes(), q.options());
  at::Tensor lse = empty_lse(s, q);
  course::lab6::DecodeOptions options;
  options.causal = causal;
  options.scale = tau;
  options.num_splits = splits;
  options.workspace = scratch.data_ptr();
  options.workspace_bytes = bytes;
  options.stream = current_stream();
  course::lab6::split_kv_forward(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr<float>(),
                                 dtype, shape, options);
  // `scratch` is freed here, while the kernels may still run: safe, because the caching
  // allocator hands the block out again only to work queued later on this same stream.
  return {o, lse};
}

// Lab 6 part 2: paged, grouped-query decoding (course/lab6_paged.hpp), with the append of the
// new rows first when k_new and v_new are given.

// The block table [B, max_pages] or the lengths [B]: int32, dense, on q's device or on the CPU
// (a server's scheduler holds them on the host anyway). No 16-byte rule: the kernels read them
// one int at a time.
void check_index_tensor(const at::Tensor& t, const char* name, const at::Tensor& q, int64_t rank,
                        const std::string& function) {
  if (t.scalar_type() != at::kInt) {
    bad_type(function, std::string(name) + " must be torch.int32, not " + dtype_name(t.scalar_type()));
  }
  if (!t.is_cpu() && t.device() != q.device()) {
    bad_value(function, std::string(name) + " is on " + t.device().str() + " but q is on " + q.device().str() +
                            " (give it on q's device or on the CPU)");
  }
  if (t.dim() != rank || t.size(0) != q.size(0)) {
    bad_value(function, std::string(name) + " must be " + (rank == 2 ? "[B, max_pages]" : "[B]") + " with B = " +
                            std::to_string(q.size(0)) + " (q's), got " + sizes_text(t));
  }
  if (rank == 2 && t.size(1) < 1) bad_value(function, std::string(name) + " has no columns: " + sizes_text(t));
  if (!t.is_contiguous()) {
    bad_value(function, std::string(name) + " is not contiguous; pass " + name + ".contiguous()");
  }
}

// An index tensor as the kernels need it (on q's device) and as the lab's checks read it (on the
// host). A CPU tensor is its own host copy, copied to the device (a blocking copy: it waits for
// the work queued on the stream); a CUDA one is copied to the host only when `check` asks for it
// (one synchronisation: the copy waits for the work queued before it, which may be what wrote
// the table).
struct IndexArrays {
  at::Tensor device;
  at::Tensor host;  // undefined when not checked
};
IndexArrays index_arrays(const at::Tensor& t, const at::Tensor& q, bool check) {
  if (t.is_cpu()) return {t.to(q.device()), t};
  return {t, check ? t.cpu() : at::Tensor()};
}

Tensors2 lab6_decode(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                     const at::Tensor& block_table, const at::Tensor& seqlens, bool causal, double scale,
                     const std::optional<at::Tensor>& k_new, const std::optional<at::Tensor>& v_new,
                     int64_t num_splits, bool check) {
  const std::string f = "decode";
  check_query_keys_values(q, k_cache, "k_cache", v_cache, "v_cache", f);
  const course::DType dtype = course_dtype(q, f, "lab 6's paged decoding", torch_dtypes(course::lab6::kLab6PagedRules));
  if (k_cache.size(3) != q.size(3)) {
    bad_value(f, "k_cache " + sizes_text(k_cache) + " must be [num_pages, H_kv, page_size, d] with q's d = " +
                     std::to_string(q.size(3)));
  }
  check_index_tensor(block_table, "block_table", q, 2, f);
  check_index_tensor(seqlens, "seqlens", q, 1, f);
  if (k_new.has_value() != v_new.has_value()) bad_value(f, "give k_new and v_new together, or neither");
  if (k_new) {
    for (const auto& [t, name] : {std::pair{&*k_new, "k_new"}, std::pair{&*v_new, "v_new"}}) {
      check_tensor(*t, name, f);
      check_same_device(q, *t, name, f);
      check_same_dtype(q, *t, name, f);
      if (t->size(0) != q.size(0) || t->size(1) != k_cache.size(1) || t->size(2) != q.size(2) ||
          t->size(3) != q.size(3)) {
        bad_value(f, std::string(name) + " must be [B, H_kv, Nq, d] = [" + std::to_string(q.size(0)) + ", " +
                         std::to_string(k_cache.size(1)) + ", " + std::to_string(q.size(2)) + ", " +
                         std::to_string(q.size(3)) + "], got " + sizes_text(*t));
      }
    }
  }
  if (num_splits < 0 || num_splits > std::numeric_limits<int>::max()) {
    bad_value(f, "num_splits must be >= 1, or 0 to let the lab choose; got " + std::to_string(num_splits));
  }
  const float tau = kernel_scale(scale, f);
  const c10::cuda::CUDAGuard device(q.device());

  course::lab6::PagedShape shape;
  shape.B = static_cast<int>(q.size(0));
  shape.H_q = static_cast<int>(q.size(1));
  shape.Nq = static_cast<int>(q.size(2));
  shape.d = static_cast<int>(q.size(3));
  shape.num_pages = static_cast<int>(k_cache.size(0));
  shape.H_kv = static_cast<int>(k_cache.size(1));
  shape.page_size = static_cast<int>(k_cache.size(2));
  shape.max_pages = static_cast<int>(block_table.size(1));

  const IndexArrays table = index_arrays(block_table, q, check);
  const IndexArrays lengths = index_arrays(seqlens, q, check);
  course::lab6::PagedCache cache;
  cache.k_pages = k_cache.data_ptr();
  cache.v_pages = v_cache.data_ptr();
  cache.block_table = table.device.data_ptr<int>();
  cache.seqlens = lengths.device.data_ptr<int>();
  // Where host copies exist, the lab checks every length and every page that a length uses; on
  // the device alone it would clamp the lengths and trust the pages (a wrong page index is a
  // read outside the pool).
  cache.block_table_host = table.host.defined() ? table.host.data_ptr<int>() : nullptr;
  cache.seqlens_host = lengths.host.defined() ? lengths.host.data_ptr<int>() : nullptr;

  // The shape first, in the lab's words (Nq above 16, H_q not a multiple of H_kv, a page size
  // it does not take, d): a BadInput, before anything runs. Then, as lab6_forward: the split
  // count the lab would choose on this device, and the workspace from the caching allocator.
  course::lab6::check_paged_shape(course::lab6::kLab6PagedRules.function, shape);
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int splits = num_splits > 0 ? static_cast<int>(num_splits)
                                    : course::lab6::choose_paged_splits(shape, dtype, sms);
  const std::size_t bytes = course::lab6::paged_workspace_bytes(shape, dtype, splits);
  at::Tensor scratch = workspace(bytes, q);
  at::Tensor o = at::empty(q.sizes(), q.options());
  at::Tensor lse = at::empty({shape.B, shape.H_q, shape.Nq}, q.options().dtype(at::kFloat));
  course::lab6::PagedOptions options;
  options.causal = causal;
  options.scale = tau;
  options.num_splits = splits;
  options.workspace = scratch.data_ptr();
  options.workspace_bytes = bytes;
  options.stream = current_stream();
  // Every check of the decoding call before the append writes into the cache: a call that is
  // rejected leaves the cache as it was.
  course::lab6::check_paged_decoding(q.data_ptr(), cache, o.data_ptr(), lse.data_ptr<float>(), dtype, shape,
                                     options, [&] { return splits; });
  if (k_new) {
    // The new rows go in first, on the same stream, so the decoding sees them (as a server does).
    course::lab6::append_kv(k_new->data_ptr(), v_new->data_ptr(), cache, dtype, shape, options.stream);
  }
  course::lab6::paged_decode(q.data_ptr(), cache, o.data_ptr(), lse.data_ptr<float>(), dtype, shape, options);
  // `scratch`, and the device copies of CPU index tensors, are freed here while the kernels may
  // still run: safe, as in lab6_forward (the allocator reuses them only for later work on this
  // stream).
  return {o, lse};
}

// A backward lab's entry point: lab 7's GPU backward and lab 9's take the same call
// (course/lab9_hopper_backward.hpp), so one binding serves both.
struct BackwardLab {
  const char* name;                           // "lab 7 (its GPU parts)", for the dtype error
  std::vector<at::ScalarType> dtypes;         // what it takes: torch_dtypes(its rules)
  std::size_t (*workspace_bytes)(const course::AttentionShape&);
  void (*backward)(const void*, const void*, const void*, const void*, const void*, const float*, void*, void*,
                   void*, course::DType, const course::AttentionShape&, const course::lab7::BackwardGpuOptions&);
};

Tensors3 gpu_backward(const BackwardLab& lab, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const at::Tensor& o, const at::Tensor& dout, const at::Tensor& lse, bool causal, double scale,
                      int64_t kernel, bool deterministic) {
  const std::string f = "backward";
  const course::AttentionShape shape = attention_shape(q, k, v, f);
  // Which dtype goes with which kernel is the lab's to check (course::BadInput -> ValueError).
  const course::DType dtype = course_dtype(q, f, lab.name, lab.dtypes);
  check_tensor(o, "o", f);
  check_tensor(dout, "do", f);
  check_tensor(lse, "lse", f, 3);
  for (const auto& [t, name] : {std::pair{&o, "o"}, std::pair{&dout, "do"}, std::pair{&lse, "lse"}}) {
    check_same_device(q, *t, name, f);
  }
  check_same_dtype(q, o, "o", f);
  check_same_dtype(q, dout, "do", f);
  if (o.sizes() != q.sizes() || dout.sizes() != q.sizes()) {
    bad_value(f, "o " + sizes_text(o) + " and do " + sizes_text(dout) + " must have q's shape " + sizes_text(q));
  }
  if (lse.scalar_type() != at::kFloat) {
    bad_type(f, "lse must be torch.float32 (the forward's), not " + dtype_name(lse.scalar_type()));
  }
  if (lse.size(0) != shape.B || lse.size(1) != shape.H || lse.size(2) != shape.Nq) {
    bad_value(f, "lse must be [B, H, Nq] = [" + std::to_string(shape.B) + ", " + std::to_string(shape.H) + ", " +
                     std::to_string(shape.Nq) + "], got " + sizes_text(lse));
  }
  const float tau = kernel_scale(scale, f);
  const c10::cuda::CUDAGuard device(q.device());
  // D = rowsum(dO o O) and the fp32 dQ accumulator live in the caller's workspace.
  const std::size_t bytes = lab.workspace_bytes(shape);
  at::Tensor scratch = workspace(bytes, q);
  at::Tensor dq = at::empty(q.sizes(), q.options());
  at::Tensor dk = at::empty(k.sizes(), k.options());
  at::Tensor dv = at::empty(v.sizes(), v.options());
  course::lab7::BackwardGpuOptions options;
  options.causal = causal;
  options.scale = tau;
  options.workspace = scratch.data_ptr();
  options.workspace_bytes = bytes;
  options.stream = current_stream();
  // The int Python passes for the kernel's name (course/gpu_labs.def's order; -1 automatic).
  options.kernel = course_attn::backward_kernel(kernel, "course_attn.backward");
  options.deterministic = deterministic;  // lab 9's mode; lab 7 says it has none (BadInput -> ValueError)
  lab.backward(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), dout.data_ptr(), lse.data_ptr<float>(),
               dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), dtype, shape, options);
  return {dq, dk, dv};
}

Tensors3 lab7_backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& o,
                       const at::Tensor& dout, const at::Tensor& lse, bool causal, double scale, int64_t kernel,
                       bool deterministic) {
  static const BackwardLab lab7{"lab 7 (its GPU parts)", torch_dtypes(course::kLab7Rules),
                                &course::lab7::backward_workspace_bytes, &course::lab7::flash_attention_backward};
  return gpu_backward(lab7, q, k, v, o, dout, lse, causal, scale, kernel, deterministic);
}

#if COURSE_ATTN_HAVE_LAB9
Tensors3 lab9_backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& o,
                       const at::Tensor& dout, const at::Tensor& lse, bool causal, double scale, int64_t kernel,
                       bool deterministic) {
  static const BackwardLab lab9{"lab 9", torch_dtypes(course::kLab9Rules), &course::lab9::backward_workspace_bytes,
                                &course::lab9::flash_attention_backward};
  return gpu_backward(lab9, q, k, v, o, dout, lse, causal, scale, kernel, deterministic);
}
#endif

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "The course's attention kernels (labs 4-9) on torch tensors; use the course_attn package.";

  // The labs' exceptions as Python's: their messages are written for the caller. Registered
  // for this module only, so they come before any translator another module installed (and so
  // do pybind11's ValueError and TypeError raised by the checks above).
  py::register_local_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const py::builtin_exception& e) {
      e.set_error();
    } catch (const course::BadInput& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const course::NotImplemented& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    }
  });

  const char* forward_doc =
      "(q, k, v, causal, scale) -> (o, lse): q [B, H, Nq, d], k and v [B, H, Nk, d], contiguous CUDA tensors; "
      "o like q, lse [B, H, Nq] float32 (natural log). scale 0 means 1/sqrt(d). Runs on the current stream.";
  const char* versioned_doc =
      "(q, k, v, causal, scale, version=-1) -> (o, lse): as lab6_forward; version: the staircase step's int "
      "(course_attn.gpu_labs, course/gpu_labs.def), -1 for the shipped one.";
  m.def("lab4_forward",
        &tiled_forward<4, course::lab4::ForwardOptions, &course::lab4::flash_attention_forward, course::kLab4Rules>,
        forward_doc, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("causal"), py::arg("scale"),
        py::arg("version") = -1);
  m.def("lab5_forward",
        &tiled_forward<5, course::lab5::ForwardOptions, &course::lab5::flash_attention_forward, course::kLab5Rules>,
        versioned_doc, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("causal"), py::arg("scale"),
        py::arg("version") = -1);
#if COURSE_ATTN_HAVE_LAB8
  m.def("lab8_forward",
        &tiled_forward<8, course::lab8::ForwardOptions, &course::lab8::flash_attention_forward, course::kLab8Rules>,
        versioned_doc, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("causal"), py::arg("scale"),
        py::arg("version") = -1);
#endif
  m.attr("has_lab8") = py::bool_(COURSE_ATTN_HAVE_LAB8 != 0);
  m.def("lab6_forward", &lab6_forward, forward_doc, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("causal"),
        py::arg("scale"));
  m.def("lab6_decode", &lab6_decode,
        "(q, k_cache, v_cache, block_table, seqlens, causal, scale, k_new, v_new, num_splits, check) -> (o, lse): "
        "lab 6 part 2, paged grouped-query decoding (course/lab6_paged.hpp), after appending k_new and v_new when "
        "given; num_splits 0: the lab's choice; check: the lab checks host copies of block_table and seqlens.",
        py::arg("q"), py::arg("k_cache"), py::arg("v_cache"), py::arg("block_table"), py::arg("seqlens"),
        py::arg("causal"), py::arg("scale"), py::arg("k_new") = py::none(), py::arg("v_new") = py::none(),
        py::arg("num_splits") = 0, py::arg("check") = true);
  m.def("lab7_backward", &lab7_backward,
        "(q, k, v, o, do, lse, causal, scale, kernel, deterministic) -> (dq, dk, dv): lab 7's GPU backward from "
        "the forward's o and lse; kernel: the int of its name (course_attn.gpu_labs, course/gpu_labs.def), -1 "
        "automatic; deterministic must be False (lab 9's mode).",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("o"), py::arg("do"), py::arg("lse"), py::arg("causal"),
        py::arg("scale"), py::arg("kernel") = -1, py::arg("deterministic") = false);
#if COURSE_ATTN_HAVE_LAB9
  m.def("lab9_backward", &lab9_backward,
        "(q, k, v, o, do, lse, causal, scale, kernel, deterministic) -> (dq, dk, dv): lab 9's Hopper backward "
        "(bf16, fp16; an sm_90 GPU), lab7_backward's call; kernel -1 (automatic) or tensor cores; deterministic: "
        "dQ added in a fixed order, the same bits in every run.",
        py::arg("q"), py::arg("k"), py::arg("v"), py::arg("o"), py::arg("do"), py::arg("lse"), py::arg("causal"),
        py::arg("scale"), py::arg("kernel") = -1, py::arg("deterministic") = false);
#endif
  m.attr("has_lab9") = py::bool_(COURSE_ATTN_HAVE_LAB9 != 0);
}
