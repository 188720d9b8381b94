// How q3c eval and q3run print a logit, so that their outputs compare
// textually: printf's %e for finite values ("5.084919e+00"), and "nan", "inf",
// "-inf" otherwise (the sign of a NaN is meaningless; fmt printed "-nan" where
// LLVM's stream printed "nan").
#pragma once

#include <string>

namespace q3::runtime {

std::string formatLogit(double value);

} // namespace q3::runtime
