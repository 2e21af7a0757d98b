// Small move-only RAII handles over the HDF5 C API and the typed writes the results file needs.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace suite::h5 {

class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)), close_(o.close_) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
      close_ = o.close_;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t id() const { return id_; }
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer close_ = nullptr;
};

// An attribute value: integers, floating point or text (written as UTF-8 variable-length).
using Value = std::variant<std::int64_t, double, std::string>;

Handle create_file(const std::string& path);  // truncates; throws std::runtime_error
Handle open_file(const std::string& path, bool writable);
Handle create_group(hid_t parent, const std::string& name);  // creates missing parents too
Handle open_group(hid_t parent, const std::string& name);
bool exists(hid_t parent, const std::string& path);

void write_attr(hid_t obj, const std::string& name, const Value& v);
Value read_attr(hid_t obj, const std::string& name);

// Row-major datasets of the given shape (rank 1 or 2).
void write_dataset(hid_t parent, const std::string& name, const std::vector<double>& data,
                   const std::vector<hsize_t>& dims);
void write_dataset(hid_t parent, const std::string& name, const std::vector<std::int64_t>& data,
                   const std::vector<hsize_t>& dims);
void write_dataset(hid_t parent, const std::string& name, const std::vector<std::string>& data);
std::vector<double> read_doubles(hid_t parent, const std::string& name,
                                 std::vector<hsize_t>* dims = nullptr);

}  // namespace suite::h5
