#include "bench/mesh/mesh_table.hpp"

#include <cstdio>
#include <string>

#include "common/results/record_access.hpp"

namespace suite::mesh {

void print_mesh_table(const std::vector<CaseRecord>& records) {
  bool header = false;
  for (const auto& r : records) {
    if (!header) {
      std::printf(
          "\nComposed block on the mesh (medians of the max over ranks; time per axis: what it "
          "left exposed in the step; bytes per rank per step, measured / predicted)\n");
      std::printf(
          "%-6s %-4s %-4s %-4s %-12s %-10s %-7s %9s %8s %8s %8s %8s %21s %21s %21s %21s "
          "%21s %6s\n",
          "pass", "tp", "cp", "dp", "order", "cp_method", "ep", "step_ms", "tp_ms", "cp_ms",
          "ep_ms", "dp_ms", "tp_bytes", "cp_bytes", "ep_bytes", "dp_bytes", "ledger", "check");
      header = true;
    }
    auto pair = [&](const char* meas, const char* pred) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%.0f/%.0f", attr_number(r, meas), attr_number(r, pred));
      return std::string(buf);
    };
    const double passed = attr_number(r, "check_passed");
    const char* verdict = passed == 1 ? "ok" : passed < 0 ? "off" : "FAIL";
    std::printf(
        "%-6s %-4.0f %-4.0f %-4.0f %-12s %-10s %-7.0f %9.3f %8.3f %8.3f %8.3f %8.3f %21s "
        "%21s %21s %21s %21s %6s\n",
        param_text(r, "pass").c_str(), attr_number(r, "tp"), attr_number(r, "cp"),
        attr_number(r, "dp"), param_text(r, "order").c_str(), param_text(r, "cp_method").c_str(),
        attr_number(r, "experts") > 0 ? attr_number(r, "ep") : 0.0,
        attr_number(r, "time_median_s") * 1e3, attr_number(r, "tp_exposed_s") * 1e3,
        attr_number(r, "cp_exposed_s") * 1e3, attr_number(r, "ep_exposed_s") * 1e3,
        attr_number(r, "dp_exposed_s") * 1e3,
        pair("tp_bytes_per_rank", "pred_tp_bytes_per_rank").c_str(),
        pair("cp_bytes_per_rank", "pred_cp_bytes_per_rank").c_str(),
        pair("ep_bytes_per_rank", "pred_ep_bytes_per_rank").c_str(),
        pair("dp_bytes_per_rank", "pred_dp_bytes_per_rank").c_str(),
        pair("ledger_bytes", "pred_ledger_bytes").c_str(), verdict);
  }
}

}  // namespace suite::mesh
