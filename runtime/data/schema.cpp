#include "data/schema.h"

namespace tp::data {

std::string_view task_name(const Schema& schema) {
  if (schema.multi_label) return "multi_label";
  return schema.classification ? "classification" : "regression";
}

}  // namespace tp::data
