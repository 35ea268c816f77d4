// interpretation.json: the one place its field names are written.
#include "train/interpretation.h"

#include <fstream>
#include <sstream>
#include <variant>

#include "common/error.h"
#include "common/files.h"

namespace tp::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json task_json(const ClassificationInterpretation& interpretation) {
  json per_class = json::array();
  for (const ClassScores& c : interpretation.per_class) {
    per_class.push_back({{"class", c.name}, {"precision", c.precision}, {"recall", c.recall}, {"f1", c.f1},
                         {"support", c.support}});
  }
  json most_confused = json::array();
  for (const ConfusedPair& pair : interpretation.most_confused) {
    most_confused.push_back({{"actual", pair.actual}, {"predicted", pair.predicted}, {"count", pair.count}});
  }
  json top_losses = json::array();
  for (const TopLoss& t : interpretation.top_losses) {
    json entry{{"sample", t.sample},
               {"actual", t.actual},
               {"predicted", t.predicted},
               {"loss", json_number(t.loss)}};
    if (!t.thumbnail.empty()) entry["thumbnail"] = t.thumbnail;
    top_losses.push_back(std::move(entry));
  }
  json predictions = json::array();
  for (const ClassifiedSample& s : interpretation.predictions) {
    predictions.push_back({{"sample", s.name},
                           {"actual", s.actual},
                           {"predicted", s.predicted},
                           {"loss", json_number(s.loss)}});
  }
  return {{"task", "classification"},
          {"accuracy", json_number(interpretation.accuracy)},
          {"classes", interpretation.classes},
          {"confusion_matrix", interpretation.confusion_matrix},
          {"confusion_matrix_normalized", interpretation.confusion_matrix_normalized},
          {"per_class", std::move(per_class)},
          {"most_confused", std::move(most_confused)},
          {"top_losses", std::move(top_losses)},
          {"predictions", std::move(predictions)}};
}

json task_json(const RegressionInterpretation& interpretation) {
  json points = json::array();
  for (const RegressedSample& p : interpretation.points) {
    points.push_back({{"sample", p.name},
                      {"actual", json_number(p.actual)},
                      {"predicted", json_number(p.predicted)},
                      {"residual", json_number(p.actual - p.predicted)}});
  }
  return {{"task", "regression"},
          {"mae", json_number(interpretation.mae)},
          {"rmse", json_number(interpretation.rmse)},
          {"points", std::move(points)}};
}

}  // namespace

json to_json(const Interpretation& interpretation) {
  json content = std::visit([](const auto& task) { return task_json(task); }, interpretation.task);
  content["epoch"] = interpretation.at.epoch;
  content["step"] = interpretation.at.step;
  content["samples"] = interpretation.samples;
  return content;
}

void write_interpretation(const fs::path& file, const Interpretation& interpretation) {
  const json content = to_json(interpretation);
  const std::string text = content.dump(1) + "\n";
  const fs::path temporary = temporary_sibling(file);
  {
    std::ofstream out(temporary, std::ios::binary);
    out << text;
    out.close();
    if (!out) fail(ExitCode::output, "{}: cannot write the interpretation (disk full?)", temporary.string());
  }
  std::ifstream in(temporary, std::ios::binary);
  std::stringstream written;
  written << in.rdbuf();
  if (written.str() != text || json::parse(written.str(), nullptr, false) != content) {
    fs::remove(temporary);
    fail(ExitCode::output, "{}: the interpretation written does not read back the same", temporary.string());
  }
  commit_file(temporary, file);
}

}  // namespace tp::train
