#include "bench/layouts/packed_documents.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "common/harness/errors.hpp"
#include "common/harness/size_list.hpp"
#include "kernels/attention/attention_index.hpp"

namespace suite::ring {
namespace {

constexpr const char* kForms =
    "fixed:L, uniform:MIN:MAX, lognormal:MEDIAN:SIGMA, pareto:MIN:ALPHA or file:PATH";
constexpr std::int64_t kMaxDocuments = std::int64_t{1} << (63 - kernels::kDocShift - 1);

[[noreturn]] void bad(const std::string& text, const std::string& why) {
  throw UsageError("--docs " + text + ": " + why);
}

double number(const std::string& text, const std::string& field) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(field, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (field.empty() || used != field.size() || !std::isfinite(v))
    bad(text, "'" + field + "' is not a number");
  return v;
}

std::vector<std::int64_t> read_lengths(const std::string& text, const std::string& path) {
  std::ifstream in(path);
  if (!in) bad(text, "cannot read " + path);
  std::vector<std::int64_t> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;  // blank lines are allowed
    const auto last = line.find_last_not_of(" \t\r");
    const std::string field = line.substr(first, last - first + 1);
    const bool digits =
        std::all_of(field.begin(), field.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (!digits || field.size() > 15 || std::stoll(field) < 1)
      bad(text, path + " line " + std::to_string(n) + ": '" + field +
                    "' is not a positive whole number of tokens");
    out.push_back(std::stoll(field));
  }
  if (out.empty()) bad(text, path + " holds no lengths");
  return out;
}

// Uniform in (0, 1], from the top 53 bits.
double unit(std::mt19937_64& g) {
  return (static_cast<double>(g() >> 11) + 1.0) * 0x1.0p-53;
}

std::int64_t draw(const DocSpec& spec, std::mt19937_64& g, std::size_t index) {
  switch (spec.kind) {
    case DocSpec::Kind::fixed:
      return static_cast<std::int64_t>(spec.a);
    case DocSpec::Kind::uniform: {
      const auto lo = static_cast<std::int64_t>(spec.a), hi = static_cast<std::int64_t>(spec.b);
      const auto span = static_cast<double>(hi - lo + 1);
      return std::min(hi, lo + static_cast<std::int64_t>(std::floor((unit(g) - 0x1.0p-53) * span)));
    }
    case DocSpec::Kind::lognormal: {  // Box-Muller: one normal from two uniforms
      const double z = std::sqrt(-2.0 * std::log(unit(g))) * std::cos(2.0 * M_PI * unit(g));
      return std::max<std::int64_t>(1, std::llround(spec.a * std::exp(spec.b * z)));
    }
    case DocSpec::Kind::pareto: {  // inverse CDF: MIN / U^(1/ALPHA)
      const double x = spec.a / std::pow(unit(g), 1.0 / spec.b);
      return x >= 0x1.0p62 ? std::int64_t{1} << 62 : static_cast<std::int64_t>(std::floor(x));
    }
    case DocSpec::Kind::file:
      return spec.lengths[index % spec.lengths.size()];
  }
  return 1;
}

}  // namespace

const char* const kDocsHelp =
    "packed documents: the sequence (N_c x c tokens) holds documents of these lengths, attention "
    "causal or full (--causal) within each, nothing across: fixed:L, uniform:MIN:MAX, "
    "lognormal:MEDIAN:SIGMA (median and log-space sigma), pareto:MIN:ALPHA (long tail), "
    "file:PATH (one length a line, used in order and again from the top); drawn with --seed "
    "until the sequence is full, the last document cut at its end. Plain Ulysses attends over "
    "the whole pack for its heads (equal work on every rank); a ring, or a hybrid's ring part, "
    "lays the pack out by --layout. Empty: one sequence, no documents (model --section varlen "
    "needs them)";

const char* const kBalancedChunkHelp =
    "with --docs, layout balanced: chunk length T in tokens (in a hybrid, of its ring part). A "
    "document of 4T tokens or more is cut over g ranks into 2g chunks of at least T, a shorter "
    "one stays whole, except that one longer than c (tokens per rank of the ring) or whose work "
    "alone exceeds a rank's share is cut over as many ranks as it needs, and documents of a g "
    "too few to even out their rounds are cut finer (chunks of 4 tokens or more). Longer "
    "chunks: fewer, larger kernel calls, rounds a little less even (e.g. the attention kernel's "
    "query tile); 0: 16, or c / 64 (at least 1) for c under 1K";

std::int64_t DocSpec::shortest() const {
  switch (kind) {
    case Kind::fixed:
    case Kind::uniform:
    case Kind::pareto:
      return static_cast<std::int64_t>(a);
    case Kind::lognormal:
      return 1;
    case Kind::file:
      return *std::max_element(lengths.begin(), lengths.end());  // every one must fit
  }
  return 1;
}

DocSpec parse_doc_spec(const std::string& text) {
  DocSpec spec;
  spec.text = text;
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  const std::string rest = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (kind == "file") {
    if (rest.empty()) bad(text, "file: needs a path");
    spec.kind = DocSpec::Kind::file;
    spec.lengths = read_lengths(text, rest);
    return spec;
  }
  const std::vector<std::string> f = split_list(rest, ':');
  auto whole = [&](double v, const char* what) {
    if (v < 1 || v != std::floor(v) || v > 0x1.0p40)
      bad(text, std::string(what) + " must be a whole number of tokens >= 1");
    return v;
  };
  auto want = [&](std::size_t n, const char* form) {
    if (colon == std::string::npos || f.size() != n) bad(text, std::string("expected ") + form);
  };
  if (kind == "fixed") {
    want(1, "fixed:L");
    spec.kind = DocSpec::Kind::fixed;
    spec.a = whole(number(text, f[0]), "L");
  } else if (kind == "uniform") {
    want(2, "uniform:MIN:MAX");
    spec.kind = DocSpec::Kind::uniform;
    spec.a = whole(number(text, f[0]), "MIN");
    spec.b = whole(number(text, f[1]), "MAX");
    if (spec.b < spec.a) bad(text, "MAX must be >= MIN");
  } else if (kind == "lognormal") {
    want(2, "lognormal:MEDIAN:SIGMA");
    spec.kind = DocSpec::Kind::lognormal;
    spec.a = number(text, f[0]);
    spec.b = number(text, f[1]);
    if (spec.a < 1) bad(text, "MEDIAN must be >= 1 token");
    if (spec.b < 0 || spec.b > 10) bad(text, "SIGMA must be in [0, 10]");
  } else if (kind == "pareto") {
    want(2, "pareto:MIN:ALPHA");
    spec.kind = DocSpec::Kind::pareto;
    spec.a = whole(number(text, f[0]), "MIN");
    spec.b = number(text, f[1]);
    if (!(spec.b > 0)) bad(text, "ALPHA must be > 0");
  } else {
    bad(text, "unknown distribution '" + kind + "' (" + kForms + ")");
  }
  return spec;
}

PackedDocuments PackedDocuments::pack(const DocSpec& spec, std::int64_t s, std::uint64_t seed,
                                      std::int64_t pad_to) {
  if (pad_to < 1 || s % pad_to != 0) throw std::logic_error("pack: s must be a multiple of pad_to");
  if (spec.shortest() > s)
    bad(spec.text, "a sequence of " + std::to_string(s) + " tokens cannot hold a document of " +
                       std::to_string(spec.shortest()) +
                       " (use a longer sequence or shorter documents)");
  std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                    static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(s >> 32)};
  std::mt19937_64 g(seq);
  PackedDocuments out;
  out.pad_to_ = pad_to;
  for (std::size_t i = 0; out.starts_.back() < s; ++i) {
    const std::int64_t len = draw(spec, g, i), at = out.starts_.back();
    if (static_cast<std::int64_t>(out.starts_.size()) > kMaxDocuments)
      bad(spec.text, "more than " + std::to_string(kMaxDocuments) + " documents");
    const std::int64_t padded = (len + pad_to - 1) / pad_to * pad_to;
    const std::int64_t slots = std::min(s - at, padded);  // a multiple of pad_to too
    const std::int64_t kept = std::min(len, slots);
    out.cut_ = len - kept;
    out.pad_slots_ += slots - kept;
    out.lengths_.push_back(kept);
    out.starts_.push_back(at + slots);
  }
  return out;
}

PackedDocuments PackedDocuments::from_lengths(const std::vector<std::int64_t>& lengths) {
  PackedDocuments out;
  for (std::int64_t l : lengths) {
    if (l < 1) throw UsageError("document lengths must be >= 1");
    out.starts_.push_back(out.starts_.back() + l);
    out.lengths_.push_back(l);
  }
  return out;
}

std::int64_t PackedDocuments::longest() const {
  std::int64_t m = 0;
  for (std::int64_t d = 0; d < count(); ++d)
    m = std::max(m, length(d));
  return m;
}

std::int64_t PackedDocuments::document_of(std::int64_t pos) const {
  return static_cast<std::int64_t>(std::upper_bound(starts_.begin(), starts_.end(), pos) -
                                   starts_.begin()) -
         1;
}

std::vector<std::int64_t> PackedDocuments::cu_seqlens() const {
  std::vector<std::int64_t> out{0};
  for (std::int64_t l : lengths_)
    out.push_back(out.back() + l);
  return out;
}

std::vector<std::int64_t> PackedDocuments::token_positions() const {
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(tokens()));
  for (std::int64_t d = 0; d < count(); ++d)
    for (std::int64_t p = start(d); p < end(d); ++p)
      out.push_back(p);
  return out;
}

std::vector<std::int64_t> PackedDocuments::tagged(
    const std::vector<std::int64_t>& positions) const {
  std::vector<std::int64_t> out(positions.size());
  for (std::size_t i = 0; i < positions.size(); ++i)
    out[i] = kernels::tag_document(
        is_pad(positions[i]) ? kernels::kNoDocument : document_of(positions[i]), positions[i]);
  return out;
}

std::int64_t PackedDocuments::total_visible_pairs(bool causal) const {
  std::int64_t n = 0;
  for (std::int64_t d = 0; d < count(); ++d)
    n += causal ? length(d) * (length(d) + 1) / 2 : length(d) * length(d);
  return n;
}

}  // namespace suite::ring
