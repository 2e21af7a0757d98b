#include "bench/moe/a2a_traffic.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>

#include "common/harness/errors.hpp"
#include "kernels/core/counter_rng.hpp"

namespace suite::moe {
namespace {

std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::vector<double> read_csv(const std::string& path, int n) {
  std::ifstream in(path);
  if (!in) throw UsageError("--traffic file:" + path + ": cannot be read");
  std::vector<double> v;
  std::string line;
  int row = 0;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::stringstream cells(line);
    std::string cell;
    int col = 0;
    while (std::getline(cells, cell, ',')) {
      std::size_t used = 0;
      double x = NAN;
      try {
        x = std::stod(cell, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      while (used < cell.size() && std::isspace(static_cast<unsigned char>(cell[used])))
        ++used;
      if (used == 0 || used != cell.size() || !std::isfinite(x) || x < 0)
        throw UsageError("--traffic file:" + path + ": row " + std::to_string(row + 1) +
                         ", column " + std::to_string(col + 1) + ": '" + cell +
                         "' is not a non-negative number");
      v.push_back(x);
      ++col;
    }
    if (col != n)
      throw UsageError("--traffic file:" + path + ": row " + std::to_string(row + 1) + " has " +
                       std::to_string(col) + " entries; the group has " + std::to_string(n) +
                       " ranks (an N x N matrix)");
    ++row;
  }
  if (row != n)
    throw UsageError("--traffic file:" + path + ": " + std::to_string(row) +
                     " rows; the group has " + std::to_string(n) + " ranks (an N x N matrix)");
  return v;
}

}  // namespace

TrafficSpec parse_traffic(const std::string& text) {
  TrafficSpec t;
  t.text = text;
  const std::string kind = text.substr(0, text.find(':'));
  const bool has_arg = text.find(':') != std::string::npos;
  const std::string arg = has_arg ? text.substr(text.find(':') + 1) : "";
  if (kind == "uniform" && !has_arg) {
    t.kind = TrafficKind::uniform;
  } else if (kind == "zipf") {
    t.kind = TrafficKind::zipf;
    if (has_arg) {
      std::size_t used = 0;
      try {
        t.alpha = std::stod(arg, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != arg.size() || !(t.alpha >= 0) || !std::isfinite(t.alpha))
        throw UsageError("--traffic " + text + ": the zipf exponent must be a number >= 0");
    }
  } else if (kind == "incast" && !has_arg) {
    t.kind = TrafficKind::incast;
  } else if (kind == "pair" && !has_arg) {
    t.kind = TrafficKind::pair;
  } else if (kind == "file" && !arg.empty()) {
    t.kind = TrafficKind::file;
    t.path = arg;
  } else {
    throw UsageError("--traffic: unknown pattern '" + text +
                     "' (uniform, zipf[:ALPHA], incast, pair, file:PATH)");
  }
  return t;
}

std::string traffic_name(const TrafficSpec& t) {
  switch (t.kind) {
    case TrafficKind::uniform:
      return "uniform";
    case TrafficKind::zipf:
      return "zipf" + number_text(t.alpha);
    case TrafficKind::incast:
      return "incast";
    case TrafficKind::pair:
      return "pair";
    case TrafficKind::file: {
      std::string stem = t.path.substr(t.path.find_last_of('/') + 1);
      stem = stem.substr(0, stem.find('.'));
      for (char& ch : stem)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '-';
      return "file-" + stem;
    }
  }
  return "?";
}

std::vector<std::int64_t> traffic_matrix(const TrafficSpec& t, int n, int ranks_per_node,
                                         std::int64_t bytes, std::int64_t elem,
                                         std::uint64_t seed) {
  const auto N = static_cast<std::size_t>(n);
  std::vector<std::int64_t> m(N * N, 0);
  auto round = [&](double b) { return static_cast<std::int64_t>(std::floor(b / elem)) * elem; };
  switch (t.kind) {
    case TrafficKind::uniform:
      std::fill(m.begin(), m.end(), round(static_cast<double>(bytes) / n));
      break;
    case TrafficKind::zipf: {
      std::vector<int> order(N);
      std::iota(order.begin(), order.end(), 0);
      // Seeded permutation: destination order[r] has popularity rank r.
      for (std::size_t i = N; i > 1; --i)
        std::swap(order[i - 1], order[kernels::counter_hash(seed, 0xa2a, i) % i]);
      double z = 0;
      for (int r = 0; r < n; ++r)
        z += std::pow(r + 1.0, -t.alpha);
      for (std::size_t s = 0; s < N; ++s)
        for (int r = 0; r < n; ++r)
          m[s * N + static_cast<std::size_t>(order[static_cast<std::size_t>(r)])] =
              round(static_cast<double>(bytes) * std::pow(r + 1.0, -t.alpha) / z);
      break;
    }
    case TrafficKind::incast:
      for (std::size_t s = 1; s < N; ++s)
        m[s * N] = round(static_cast<double>(bytes));
      for (std::size_t d = 0; d < N; ++d)
        m[d] = round(static_cast<double>(bytes) / n);
      break;
    case TrafficKind::pair: {
      if (n < 2 * ranks_per_node)
        throw UsageError("--traffic pair: needs two nodes (N_e = " + std::to_string(n) +
                         ", --ranks-per-node " + std::to_string(ranks_per_node) + ")");
      const auto P = static_cast<std::size_t>(ranks_per_node);
      for (std::size_t l = 0; l < P; ++l) {
        m[l * N + P + l] = round(static_cast<double>(bytes));
        m[(P + l) * N + l] = round(static_cast<double>(bytes));
      }
      break;
    }
    case TrafficKind::file: {
      const std::vector<double> v = read_csv(t.path, n);
      const bool fractions = std::all_of(v.begin(), v.end(), [](double x) { return x <= 1; });
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (fractions) {
          m[i] = round(v[i] * static_cast<double>(bytes));
          continue;
        }
        if (v[i] != std::floor(v[i]) || static_cast<std::int64_t>(v[i]) % elem != 0)
          throw UsageError("--traffic file:" + t.path + ": entry (" + std::to_string(i / N + 1) +
                           ", " + std::to_string(i % N + 1) + ") = " + number_text(v[i]) +
                           " bytes is not a whole number of " + std::to_string(elem) +
                           "-byte elements");
        m[i] = static_cast<std::int64_t>(v[i]);
      }
      break;
    }
  }
  return m;
}

}  // namespace suite::moe
