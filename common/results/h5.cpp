#include "common/results/h5.hpp"

#include <stdexcept>

namespace suite::h5 {
namespace {

void ok(herr_t rc, const std::string& what) {
  if (rc < 0) throw std::runtime_error("HDF5: " + what + " failed");
}

hid_t valid(hid_t id, const std::string& what) {
  if (id < 0) throw std::runtime_error("HDF5: " + what + " failed");
  return id;
}

Handle utf8_string_type() {
  Handle t(valid(H5Tcopy(H5T_C_S1), "H5Tcopy"), H5Tclose);
  ok(H5Tset_size(t.id(), H5T_VARIABLE), "H5Tset_size");
  ok(H5Tset_cset(t.id(), H5T_CSET_UTF8), "H5Tset_cset");
  return t;
}

Handle simple_space(const std::vector<hsize_t>& dims) {
  return Handle(valid(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                      "H5Screate_simple"),
                H5Sclose);
}

template <class T>
void write_numeric(hid_t parent, const std::string& name, const std::vector<T>& data,
                   const std::vector<hsize_t>& dims, hid_t type) {
  hsize_t n = 1;
  for (auto d : dims)
    n *= d;
  if (n != data.size())
    throw std::runtime_error("HDF5: dataset " + name + " shape does not match its data");
  Handle space = simple_space(dims);
  Handle ds(valid(H5Dcreate2(parent, name.c_str(), type, space.id(), H5P_DEFAULT, H5P_DEFAULT,
                             H5P_DEFAULT),
                  "create dataset " + name),
            H5Dclose);
  if (n)
    ok(H5Dwrite(ds.id(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()),
       "write dataset " + name);
}

}  // namespace

Handle create_file(const std::string& path) {
  // Quiet the library's own stack dumps; failures surface as exceptions with our message.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  return Handle(
      valid(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "create " + path),
      H5Fclose);
}

Handle open_file(const std::string& path, bool writable) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  return Handle(valid(H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT),
                      "open " + path),
                H5Fclose);
}

Handle create_group(hid_t parent, const std::string& name) {
  Handle lcpl(valid(H5Pcreate(H5P_LINK_CREATE), "H5Pcreate"), H5Pclose);
  ok(H5Pset_create_intermediate_group(lcpl.id(), 1), "H5Pset_create_intermediate_group");
  return Handle(valid(H5Gcreate2(parent, name.c_str(), lcpl.id(), H5P_DEFAULT, H5P_DEFAULT),
                      "create group " + name),
                H5Gclose);
}

Handle open_group(hid_t parent, const std::string& name) {
  return Handle(valid(H5Gopen2(parent, name.c_str(), H5P_DEFAULT), "open group " + name), H5Gclose);
}

bool exists(hid_t parent, const std::string& path) {
  // Walk the path one link at a time: H5Lexists fails on a missing intermediate link.
  std::string sofar;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    sofar += (sofar.empty() ? "" : "/") + path.substr(pos, next - pos);
    if (H5Lexists(parent, sofar.c_str(), H5P_DEFAULT) <= 0) return false;
    pos = next + 1;
  }
  return true;
}

void write_attr(hid_t obj, const std::string& name, const Value& v) {
  if (H5Aexists(obj, name.c_str()) > 0)
    ok(H5Adelete(obj, name.c_str()), "delete attribute " + name);
  Handle scalar(valid(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose);
  if (auto* i = std::get_if<std::int64_t>(&v)) {
    Handle a(valid(H5Acreate2(obj, name.c_str(), H5T_NATIVE_INT64, scalar.id(), H5P_DEFAULT,
                              H5P_DEFAULT),
                   name),
             H5Aclose);
    ok(H5Awrite(a.id(), H5T_NATIVE_INT64, i), "write attribute " + name);
  } else if (auto* d = std::get_if<double>(&v)) {
    Handle a(valid(H5Acreate2(obj, name.c_str(), H5T_NATIVE_DOUBLE, scalar.id(), H5P_DEFAULT,
                              H5P_DEFAULT),
                   name),
             H5Aclose);
    ok(H5Awrite(a.id(), H5T_NATIVE_DOUBLE, d), "write attribute " + name);
  } else {
    Handle type = utf8_string_type();
    Handle a(valid(H5Acreate2(obj, name.c_str(), type.id(), scalar.id(), H5P_DEFAULT, H5P_DEFAULT),
                   name),
             H5Aclose);
    const char* text = std::get<std::string>(v).c_str();
    ok(H5Awrite(a.id(), type.id(), &text), "write attribute " + name);
  }
}

Value read_attr(hid_t obj, const std::string& name) {
  Handle a(valid(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "open attribute " + name), H5Aclose);
  Handle type(valid(H5Aget_type(a.id()), "H5Aget_type"), H5Tclose);
  switch (H5Tget_class(type.id())) {
    case H5T_INTEGER: {
      std::int64_t i = 0;
      ok(H5Aread(a.id(), H5T_NATIVE_INT64, &i), "read attribute " + name);
      return i;
    }
    case H5T_FLOAT: {
      double d = 0;
      ok(H5Aread(a.id(), H5T_NATIVE_DOUBLE, &d), "read attribute " + name);
      return d;
    }
    case H5T_STRING: {
      Handle mem = utf8_string_type();
      char* text = nullptr;
      ok(H5Aread(a.id(), mem.id(), &text), "read attribute " + name);
      std::string s = text ? text : "";
      H5free_memory(text);
      return s;
    }
    default:
      throw std::runtime_error("HDF5: attribute " + name + " has an unsupported type");
  }
}

void write_dataset(hid_t parent, const std::string& name, const std::vector<double>& data,
                   const std::vector<hsize_t>& dims) {
  write_numeric(parent, name, data, dims, H5T_NATIVE_DOUBLE);
}

void write_dataset(hid_t parent, const std::string& name, const std::vector<std::int64_t>& data,
                   const std::vector<hsize_t>& dims) {
  write_numeric(parent, name, data, dims, H5T_NATIVE_INT64);
}

void write_dataset(hid_t parent, const std::string& name, const std::vector<std::string>& data) {
  std::vector<const char*> ptrs;
  for (const auto& s : data)
    ptrs.push_back(s.c_str());
  Handle type = utf8_string_type();
  Handle space = simple_space({data.size()});
  Handle ds(valid(H5Dcreate2(parent, name.c_str(), type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT,
                             H5P_DEFAULT),
                  "create dataset " + name),
            H5Dclose);
  if (!data.empty())
    ok(H5Dwrite(ds.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), "write " + name);
}

std::vector<double> read_doubles(hid_t parent, const std::string& name,
                                 std::vector<hsize_t>* dims) {
  Handle ds(valid(H5Dopen2(parent, name.c_str(), H5P_DEFAULT), "open dataset " + name), H5Dclose);
  Handle space(valid(H5Dget_space(ds.id()), "H5Dget_space"), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(space.id());
  std::vector<hsize_t> d(static_cast<size_t>(rank > 0 ? rank : 0));
  H5Sget_simple_extent_dims(space.id(), d.data(), nullptr);
  hsize_t n = 1;
  for (auto x : d)
    n *= x;
  std::vector<double> out(n);
  if (n)
    ok(H5Dread(ds.id(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()),
       "read " + name);
  if (dims) *dims = d;
  return out;
}

}  // namespace suite::h5
