#include "runtime/TensorView.h"

namespace q3::runtime {

int64_t TensorView::numElements() const {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim; // cannot overflow: the parser rejected shapes whose product does
  return count;
}

std::vector<float> readAsF32(const TensorView &tensor) {
  // Sized from byteSize, which is bounded by the file, not from the shape alone.
  std::vector<float> values(tensor.byteSize / dtypeSize(tensor.dtype));
  convertToF32(tensor.dtype, tensor.data, values.data(), values.size());
  return values;
}

} // namespace q3::runtime
