// bench_decoding: the decoding regime (Nq = 1 query row per head against a long KV cache), where
// attention is memory-bound and the figure that matters is the bandwidth of reading K and V.
//
//   bench_decoding --out results.csv [--quick] [--bh 1024,32] [--dtypes bf16,fp32]
//                  [--impls lab6,lab5] [--budget-s 120] [--max-reps 20]
//
// Configurations: d = 128, Nq = 1, non-causal, B * H in {32 * 32, 1 * 32} (H = 32), and
// Nk in {1k, 2k, ..., 128k} (quick: 4k and 32k). A configuration whose K and V do not fit in 60%
// of the free device memory is skipped (fp32 at B * H = 1024 and Nk = 128k needs 128 GiB).
// Implementations (those built):
//   lab6   course::lab6::split_kv_forward, the library's own split count (num_splits = 0)
//   lab5   course::lab5::flash_attention_forward (bf16 only): no split, one CTA per 64 query
//          rows of each head, i.e. B * H CTAs that each read their whole cache
// Method:
//   * K/V bytes = 2 * B * H * Nk * d * bytes per element; GB/s = K/V bytes / time (Q, O and the
//     workspace are less than 0.1% of it at these sizes).
//   * copy GB/s: a device-to-device cudaMemcpyAsync of 4 GiB in the same process, counted as
//     bytes read + bytes written (what a copy moves through HBM), median of 10. `fraction` is
//     GB/s / copy GB/s.
//   * time: one call that is checked (max |O - O_fp64| over head (0, 0), against
//     reference/gpu/attention_fp64), one warm-up that sizes the repetitions
//     (reps = clamp(300 ms / t, 3, max-reps)), then reps calls each between its own cudaEvent
//     pair; the median is reported.
// Each row is written and flushed as soon as it is measured.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention_fp64.hpp"  // reference/gpu/
#include "event_timing.hpp"
#include "row_check.hpp"
#include "tolerances.hpp"       // grader/common: the sanity limit of a benchmark row
#include "course/lab6_decoding.hpp"
#if COURSE_HAVE_LAB5
#include "course/lab5_tensor_core.hpp"
#endif

namespace {

using course::check_cuda;
using course::DeviceBuffer;

constexpr int kD = 128;
constexpr int kHeads = 32;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Device-to-device copy bandwidth, bytes read + written per second, in GB/s.
double copy_gbps(cudaStream_t stream) {
  const size_t bytes = size_t(4) << 30;
  DeviceBuffer a(bytes), b(bytes);
  check_cuda(cudaMemsetAsync(a.get(), 1, bytes, stream), "memset");
  auto call = [&] { check_cuda(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream), "copy"); };
  call();
  const float ms = bench::time_ms(call, stream, 10);
  return 2.0 * double(bytes) / (ms * 1e-3) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path, bh_list = "1024,32", dtypes_arg = "bf16,fp32", impls_arg = "lab6,lab5";
  bool quick = false;
  double budget_s = 1e9;
  int max_reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--out") out_path = value();
    else if (a == "--quick") quick = true;
    else if (a == "--bh") bh_list = value();
    else if (a == "--dtypes") dtypes_arg = value();
    else if (a == "--impls") impls_arg = value();
    else if (a == "--budget-s") budget_s = std::stod(value());
    else if (a == "--max-reps") max_reps = std::stoi(value());
    else if (a == "--list") {
      std::puts("lab6");
#if COURSE_HAVE_LAB5
      std::puts("lab5");
#endif
      return 0;
    } else {
      std::fprintf(stderr, "bench_decoding: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (out_path.empty()) {
    std::fprintf(stderr, "usage: bench_decoding --out results.csv [--quick] [--bh 1024,32] [--dtypes bf16,fp32] "
                         "[--impls lab6,lab5] [--budget-s S] [--max-reps N]\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  auto elapsed_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  FILE* csv = std::fopen(out_path.c_str(), "w");
  if (!csv) {
    std::perror(out_path.c_str());
    return 2;
  }
  std::fprintf(csv, "impl,dtype,BH,d,Nq,Nk,splits,ms,kv_bytes,gbps,copy_gbps,fraction,status,max_abs_err,reps\n");
  std::fflush(csv);

  const std::vector<std::string> impls = split(impls_arg), dtypes = split(dtypes_arg);
  std::vector<int> nks;
  if (quick) nks = {4096, 32768};
  else
    for (int n = 1024; n <= 131072; n *= 2) nks.push_back(n);

  cudaStream_t stream;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const double copy = copy_gbps(stream);
  std::printf("device-to-device copy: %.0f GB/s (bytes read + written)\n", copy);

  for (const std::string& dname : dtypes) {
    const bool bf16 = dname == "bf16";
    const size_t elem = bf16 ? 2 : 4;
    for (const std::string& bh_s : split(bh_list)) {
      const int bh = std::stoi(bh_s);
      const int B = std::max(1, bh / kHeads), H = bh / B;
      for (int nk : nks) {
        const size_t kv_elems = size_t(B) * H * nk * kD;
        const size_t kv_bytes = 2 * kv_elems * elem;
        size_t free_b = 0, total_b = 0;
        check_cuda(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
        for (const std::string& impl : {std::string("lab6"), std::string("lab5")}) {
          if (!has(impls, impl)) continue;
          std::string status = "ok";
          double ms = NAN, err = NAN;
          int reps = 0, splits = 1;
#if !COURSE_HAVE_LAB5
          if (impl == "lab5") continue;
#endif
          if (impl == "lab5" && !bf16) continue;  // lab 5 is bf16/fp16 only
          if (elapsed_s() > budget_s) status = "skipped:time budget spent";
          else if (kv_bytes > free_b * 6 / 10) status = "skipped:K and V do not fit";
          if (status == "ok") {
            try {
              DeviceBuffer q(size_t(bh) * kD * elem), k(kv_elems * elem), v(kv_elems * elem), o(size_t(bh) * kD * elem),
                  lse(size_t(bh) * 4), o64(size_t(kD) * 8), lse64(8);
              uint64_t seed = 7;
              for (DeviceBuffer* b : {&q, &k, &v}) {
                const int64_t n = int64_t(b == &q ? size_t(bh) * kD : kv_elems);
                if (bf16) course::fill_normal(static_cast<__nv_bfloat16*>(b->get()), n, ++seed, stream);
                else course::fill_normal(static_cast<float*>(b->get()), n, ++seed, stream);
              }
              const course::DType dt = bf16 ? course::DType::bf16 : course::DType::fp32;
              const course::lab6::DecodeShape shape{B, H, 1, nk, kD};
              std::function<void()> call;
              std::unique_ptr<DeviceBuffer> workspace;
              if (impl == "lab6") {
                int sms = 0, dev = 0;
                check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
                check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "SM count");
                splits = course::lab6::choose_num_splits(shape, dt, sms);
                const size_t ws = course::lab6::split_kv_workspace_bytes(shape, dt, splits);
                workspace = std::make_unique<DeviceBuffer>(ws);
                call = [&, ws] {
                  course::lab6::DecodeOptions opt;
                  opt.num_splits = splits;
                  opt.workspace = workspace->get();
                  opt.workspace_bytes = ws;
                  opt.stream = stream;
                  course::lab6::split_kv_forward(q.get(), k.get(), v.get(), o.get(), static_cast<float*>(lse.get()), dt, shape, opt);
                };
              } else {
#if COURSE_HAVE_LAB5
                call = [&] {
                  course::lab5::ForwardOptions opt;
                  opt.stream = stream;
                  course::lab5::flash_attention_forward(q.get(), k.get(), v.get(), o.get(), static_cast<float*>(lse.get()),
                                                        course::DType::bf16, {B, H, 1, nk, kD}, opt);
                };
#endif
              }
              // Call 1, checked against fp64 on head (0, 0).
              call();
              course::reference::gpu::attention_fp64(
                  q.get(), k.get(), v.get(), dt,
                  1, 1, 1, nk, kD, false, 0.0, static_cast<double*>(o64.get()), static_cast<double*>(lse64.get()), stream);
              check_cuda(cudaStreamSynchronize(stream), "first call");
              std::vector<double> ref(kD);
              check_cuda(cudaMemcpy(ref.data(), o64.get(), kD * 8, cudaMemcpyDeviceToHost), "memcpy");
              const std::vector<float> got = bench::download_as_float(o.get(), kD, bf16, stream);
              err = 0;
              for (int c = 0; c < kD; ++c) err = std::isfinite(got[c]) ? std::max(err, std::fabs(got[c] - ref[c])) : NAN;
              status = bench::error_status(err, bf16 ? "bf16" : "fp32");
              // Warm-up that sizes the repetitions, then the timed calls.
              ms = bench::sized_median_ms(call, stream, max_reps, reps);
            } catch (const std::exception& e) {
              status = std::string("error:") + e.what();
              for (char& ch : status)
                if (ch == ',' || ch == '\n') ch = ' ';
              if (cudaDeviceSynchronize() != cudaSuccess) {
                std::fprintf(stderr, "CUDA context lost: %s\n", e.what());
                return 1;
              }
            }
          }
          const double gbps = double(kv_bytes) / (ms * 1e-3) / 1e9;
          std::fprintf(csv, "%s,%s,%d,%d,1,%d,%d,%.6g,%zu,%.6g,%.6g,%.4f,%s,%.3g,%d\n", impl.c_str(), dname.c_str(), bh,
                       kD, nk, splits, ms, kv_bytes, gbps, copy, gbps / copy, status.c_str(), err, reps);
          std::fflush(csv);
          std::printf("%-5s %s B*H=%4d Nk=%6d splits=%3d  %8.3f ms  %7.0f GB/s  %5.1f%% of copy  err %.2e  %s\n",
                      impl.c_str(), dname.c_str(), bh, nk, splits, ms, gbps, 100 * gbps / copy, err, status.c_str());
          std::fflush(stdout);
        }
      }
    }
  }
  std::fclose(csv);
  return 0;
}
