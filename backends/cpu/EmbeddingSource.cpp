//===- EmbeddingSource.cpp - the embedding kernel template ----------------- ===//
#include "backends/cpu/KernelSource.h"
#include "backends/cpu/KernelSourceUtil.h"

#include <fmt/format.h>

namespace q3::cpu {

using namespace detail;

std::string embeddingSource(const EmbeddingKernel &kernel) {
  const std::string tableType =
      fmt::format("memref<{}x{}x{}>", kernel.vocab, kernel.hidden, storageType(kernel.table));
  const std::string yType = fmt::format("memref<?x{}xf32>", kernel.hidden);
  return fmt::format(
      R"mlir(
func.func @q3k_{name}(%eb: memref<?xi8>, %tb: memref<?xi8>, %yb: memref<?xi8>, %rows: index, %visible: index, %capacity: index, %wgBegin: index, %wgEnd: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cHidden = arith.constant {hidden} : index
  %tokens = memref.view %tb[%c0][%rows] : memref<?xi8> to memref<?xi32>
  %table = memref.view %eb[%c0][] : memref<?xi8> to {tableType}
  %y = memref.view %yb[%c0][%rows] : memref<?xi8> to {yType}
  scf.for %t = %wgBegin to %wgEnd step %c1 {{
    %id32 = memref.load %tokens[%t] : memref<?xi32>
    %id = arith.index_cast %id32 : i32 to index
    scf.for %k = %c0 to %cHidden step %c1 {{
      {load}
      memref.store %v, %y[%t, %k] : {yType}
    }}
  }}
  return
}}
)mlir",
      fmt::arg("name", kernel.name), fmt::arg("hidden", kernel.hidden),
      fmt::arg("tableType", tableType), fmt::arg("yType", yType),
      fmt::arg("load", widenedLoad(kernel.table, "%v", "%table", "%id, %k", tableType)));
}

} // namespace q3::cpu
