#include "train/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "common/files.h"

namespace tp::train {
namespace {

using nlohmann::json;

std::string escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A whole number without exponent or decimals (steps, epochs), anything else with 3 significant digits.
std::string tick_label(double value) {
  if (std::abs(value - std::round(value)) < 1e-9 * std::max(1.0, std::abs(value)) && std::abs(value) < 1e7) {
    return fmt::format("{:.0f}", value);
  }
  return fmt::format("{:.3g}", value);
}

std::string metric_cell(double value) {
  return std::isnan(value) ? "" : fmt::format("{:.4f}", value);
}

// 1, 2 or 5 times a power of ten, about range / 4.
double tick_step(double range) {
  const double rough = range / 4.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(rough)));
  for (double factor : {1.0, 2.0, 5.0}) {
    if (factor * magnitude >= rough) return factor * magnitude;
  }
  return 10.0 * magnitude;
}

struct Point {
  double x;
  double y;
};

struct Series {
  std::string name;
  std::string color;
  std::vector<Point> points;
  bool markers = false;  // epochs: a dot on each value
};

// At most `limit` points: consecutive points averaged in equal groups, so a long run's chart stays small.
std::vector<Point> thin(const std::vector<Point>& points, std::size_t limit) {
  if (points.size() <= limit) return points;
  std::vector<Point> out;
  const double group = static_cast<double>(points.size()) / static_cast<double>(limit);
  for (std::size_t g = 0; g < limit; ++g) {
    const auto begin = static_cast<std::size_t>(std::floor(static_cast<double>(g) * group));
    const auto end =
        std::min(points.size(), static_cast<std::size_t>(std::floor(static_cast<double>(g + 1) * group)));
    double x = 0, y = 0, n = 0;
    for (std::size_t i = begin; i < end; ++i) {
      if (!std::isfinite(points[i].y)) continue;
      x += points[i].x;
      y += points[i].y;
      ++n;
    }
    if (n > 0) out.push_back({x / n, y / n});
  }
  return out;
}

// An SVG line chart of `series` with axes, grid lines, tick labels and a legend.
std::string line_chart(const std::string& title, const std::string& x_label, std::vector<Series> series) {
  constexpr double kWidth = 560, kHeight = 300;
  constexpr double kLeft = 64, kRight = kWidth - 16, kTop = 56, kBottom = kHeight - 44;
  series.erase(std::remove_if(series.begin(), series.end(),
                              [](const Series& s) {
                                return std::none_of(s.points.begin(), s.points.end(),
                                                    [](const Point& p) { return std::isfinite(p.y); });
                              }),
               series.end());
  double x_min = INFINITY, x_max = -INFINITY, y_min = INFINITY, y_max = -INFINITY;
  for (auto& s : series) {
    s.points = thin(s.points, 800);
    for (const Point& p : s.points) {
      if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
      x_min = std::min(x_min, p.x);
      x_max = std::max(x_max, p.x);
      y_min = std::min(y_min, p.y);
      y_max = std::max(y_max, p.y);
    }
  }
  std::string svg = fmt::format(
      "<svg class=\"chart\" viewBox=\"0 0 {0} {1}\" width=\"{0}\" height=\"{1}\" role=\"img\" "
      "aria-label=\"{2}\">\n"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n"
      "<text x=\"{3}\" y=\"22\" class=\"title\">{2}</text>\n",
      kWidth, kHeight, escape(title), kLeft);
  if (series.empty()) {
    return svg + fmt::format(
                     "<text x=\"{}\" y=\"{}\" class=\"empty\" text-anchor=\"middle\">no values "
                     "yet</text>\n</svg>\n",
                     (kLeft + kRight) / 2, (kTop + kBottom) / 2);
  }
  if (x_max == x_min) {
    x_min -= 1;
    x_max += 1;
  }
  if (y_max == y_min) {
    const double pad = y_min == 0 ? 1.0 : std::abs(y_min) * 0.1;
    y_min -= pad;
    y_max += pad;
  }
  const double y_step = tick_step(y_max - y_min);
  y_min = std::floor(y_min / y_step) * y_step;
  y_max = std::ceil(y_max / y_step) * y_step;
  const double x_step = tick_step(x_max - x_min);
  auto sx = [&](double x) { return kLeft + (x - x_min) / (x_max - x_min) * (kRight - kLeft); };
  auto sy = [&](double y) { return kBottom - (y - y_min) / (y_max - y_min) * (kBottom - kTop); };

  for (double y = y_min; y <= y_max + y_step * 1e-6; y += y_step) {
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/>\n"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{}</text>\n",
        kLeft, sy(y), kRight, sy(y), kLeft - 6, sy(y) + 4, tick_label(y));
  }
  for (double x = std::ceil(x_min / x_step) * x_step; x <= x_max + x_step * 1e-6; x += x_step) {
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" class=\"axis\"/>\n"
        "<text x=\"{0:.1f}\" y=\"{3:.1f}\" class=\"tick\" text-anchor=\"middle\">{4}</text>\n",
        sx(x), kBottom, kBottom + 5, kBottom + 18, tick_label(x));
  }
  svg += fmt::format(
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" class=\"axis\"/>\n"
      "<line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{1}\" class=\"axis\"/>\n"
      "<text x=\"{4}\" y=\"{5}\" class=\"label\" text-anchor=\"middle\">{6}</text>\n",
      kLeft, kBottom, kRight, kTop, (kLeft + kRight) / 2, kHeight - 8, escape(x_label));

  double legend_x = kLeft;
  for (const Series& s : series) {
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"32\" width=\"14\" height=\"4\" fill=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"38\" class=\"legend\">{}</text>\n",
        legend_x, s.color, legend_x + 18, escape(s.name));
    legend_x += 32 + 7.0 * static_cast<double>(s.name.size());
    std::string path;
    bool pen_down = false;
    for (const Point& p : s.points) {
      if (!std::isfinite(p.y)) {
        pen_down = false;
        continue;
      }
      path += fmt::format("{}{:.1f},{:.1f}", pen_down ? " L" : (path.empty() ? "M" : " M"), sx(p.x), sy(p.y));
      pen_down = true;
    }
    svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\"/>\n", path, s.color);
    if (s.markers) {
      for (const Point& p : s.points) {
        if (std::isfinite(p.y)) {
          svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", sx(p.x), sy(p.y),
                             s.color);
        }
      }
    }
  }
  return svg + "</svg>\n";
}

bool any_value(const std::vector<EpochMetrics>& epochs, double EpochMetrics::*metric) {
  return std::any_of(epochs.begin(), epochs.end(),
                     [&](const EpochMetrics& m) { return !std::isnan(m.*metric); });
}

struct MetricColumn {
  std::string name;
  double EpochMetrics::*member;
  std::string color;
};

std::vector<MetricColumn> validation_metrics(const std::vector<EpochMetrics>& epochs, std::int64_t top_k) {
  const std::vector<MetricColumn> all = {
      {"accuracy", &EpochMetrics::valid_accuracy, "#2ca02c"},
      {"error rate", &EpochMetrics::error_rate, "#d62728"},
      {fmt::format("top-{} accuracy", top_k), &EpochMetrics::top_k_accuracy, "#9467bd"},
      {"MAE", &EpochMetrics::mae, "#8c564b"},
      {"MSE", &EpochMetrics::mse, "#e377c2"}};
  std::vector<MetricColumn> present;
  for (const auto& column : all) {
    if (any_value(epochs, column.member)) present.push_back(column);
  }
  return present;
}

std::string text_of(const json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

std::string summary_table(const ReportInput& input) {
  const json& r = input.record;
  const json source = r.value("source", json::object());
  const json data = r.value("data", json::object());
  const json versions = r.value("versions", json::object());
  const std::vector<std::string> bad = data.value("bad_files", std::vector<std::string>{});
  std::vector<std::pair<std::string, std::string>> rows = {
      {"job", text_of(r.value("job", json()))},
      {"repository", text_of(source.value("repo", json()))},
      {"ref", text_of(source.value("ref", json()))},
      {"commit", text_of(source.value("commit", json()))},
      {"spec", text_of(source.value("spec", json()))},
      {"world size", text_of(r.value("world_size", json()))},
      {"training samples", text_of(data.value("train_samples", json()))},
      {"validation samples", text_of(data.value("valid_samples", json()))},
      {"classes", fmt::format("{}", fmt::join(data.value("classes", std::vector<std::string>{}), ", "))},
      {"bad files", bad.empty() ? "none" : fmt::format("{}: {}", bad.size(), fmt::join(bad, ", "))},
      {"started", text_of(r.value("started", json()))},
      {"elapsed", fmt::format("{:.1f} s", r.value("seconds", 0.0))},
      {"versions", fmt::format("trainpoint {}, LibTorch {}", text_of(versions.value("trainpoint", json())),
                               text_of(versions.value("libtorch", json())))},
  };
  std::string html = "<table class=\"record\">\n";
  for (const auto& [key, value] : rows) {
    html += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", escape(key), escape(value));
  }
  return html + "</table>\n";
}

std::string epoch_table(const ReportInput& input, const std::vector<MetricColumn>& metrics) {
  std::string html =
      "<table class=\"epochs\">\n<tr><th>epoch</th><th>step</th><th>lr</th><th>train loss</th>"
      "<th>valid loss</th>";
  for (const auto& column : metrics) html += fmt::format("<th>{}</th>", escape(column.name));
  html += "<th>seconds</th></tr>\n";
  for (const EpochMetrics& m : input.epochs) {
    html += fmt::format("<tr><td>{}</td><td>{}</td><td>{:.3g}</td><td>{}</td><td>{}</td>", m.epoch, m.step,
                        m.lr, metric_cell(m.train_loss), metric_cell(m.valid_loss));
    for (const auto& column : metrics) html += fmt::format("<td>{}</td>", metric_cell(m.*column.member));
    html += fmt::format("<td>{:.1f}</td></tr>\n", m.seconds);
  }
  return html + "</table>\n";
}

constexpr const char* kStyle = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 24px;
       color: #222; background: #f6f7f9; }
h1 { font-size: 22px; margin: 0 0 4px 0; }
h2 { font-size: 16px; margin: 24px 0 8px 0; }
.status { color: #555; margin: 0 0 16px 0; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
.chart { background: #fff; border: 1px solid #ddd; border-radius: 6px; max-width: 100%; height: auto; }
.chart .title { font-size: 15px; font-weight: 600; fill: #222; }
.chart .tick, .chart .legend { font-size: 12px; fill: #444; }
.chart .label { font-size: 12px; fill: #666; }
.chart .empty { font-size: 14px; fill: #999; }
.chart .grid { stroke: #e6e6e6; stroke-width: 1; }
.chart .axis { stroke: #888; stroke-width: 1; }
table { border-collapse: collapse; background: #fff; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 4px 10px; text-align: left; }
table.epochs td { text-align: right; font-variant-numeric: tabular-nums; }
table.record th { background: #f0f1f3; width: 160px; }
pre { background: #fff; border: 1px solid #ddd; padding: 12px; font-size: 12px; overflow-x: auto; }
)";

// The page up to the opening of the charts' row.
std::string page_start(const std::string& job, const std::string& kind, const std::string& status) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n"
      "<title>{0} - {1}</title>\n<style>{2}</style>\n</head>\n<body>\n"
      "<h1>{0}</h1>\n<p class=\"status\">{3}</p>\n<div class=\"charts\">\n",
      escape(job), escape(kind), kStyle, escape(status));
}

}  // namespace

std::string render_report(const ReportInput& input) {
  const std::string job = text_of(input.record.value("job", json()));
  const std::int64_t done = input.epochs.empty() ? 0 : input.epochs.back().epoch;
  const std::string status =
      input.finished
          ? fmt::format("finished: {} epochs in {:.1f} s", done, input.record.value("seconds", 0.0))
          : fmt::format("running: epoch {} of {} done", done, input.total_epochs);

  std::vector<Point> train_loss, lr, valid_loss;
  for (const StepRecord& s : input.steps) {
    train_loss.push_back({static_cast<double>(s.step), s.train_loss});
    lr.push_back({static_cast<double>(s.step), s.lr});
  }
  for (const EpochMetrics& m : input.epochs)
    valid_loss.push_back({static_cast<double>(m.step), m.valid_loss});
  const std::vector<MetricColumn> metrics = validation_metrics(input.epochs, input.top_k);
  std::vector<Series> metric_series;
  for (const auto& column : metrics) {
    Series s{column.name, column.color, {}, true};
    for (const EpochMetrics& m : input.epochs)
      s.points.push_back({static_cast<double>(m.epoch), m.*column.member});
    metric_series.push_back(std::move(s));
  }

  std::string html = page_start(job, "trainpoint report", status);
  html += line_chart("Loss", "step",
                     {{"train loss (per step)", "#1f77b4", std::move(train_loss), false},
                      {"valid loss (per epoch)", "#ff7f0e", std::move(valid_loss), true}});
  html += line_chart("Learning rate", "step", {{"lr", "#17a2b8", std::move(lr), false}});
  html += line_chart("Validation metrics", "epoch", std::move(metric_series));
  html += "</div>\n<h2>Epochs</h2>\n" + epoch_table(input, metrics);
  html += "<h2>Run</h2>\n" + summary_table(input);
  html += fmt::format("<h2>Resolved spec</h2>\n<pre>{}</pre>\n</body>\n</html>\n",
                      escape(text_of(input.record.value("resolved_spec", json()))));
  return html;
}

void write_report(const std::filesystem::path& file, const ReportInput& input) {
  write_file_atomic(file, render_report(input));
}

std::string render_lr_find(const std::string& job, const std::vector<LrFindPoint>& points, double suggested_lr,
                           double steepest_lr) {
  Series loss{"loss", "#aec7e8", {}, false};
  Series smoothed{"smoothed loss", "#1f77b4", {}, false};
  for (const LrFindPoint& p : points) {
    loss.points.push_back({std::log10(p.lr), p.loss});
    smoothed.points.push_back({std::log10(p.lr), p.smoothed_loss});
  }
  const std::string status = fmt::format(
      "learning-rate range test: {} steps. Suggested train.lr: {:.3g} (a tenth of the lr with the lowest loss); "
      "steepest descent at {:.3g}.",
      points.size(), suggested_lr, steepest_lr);
  return page_start(job, "trainpoint lr_find", status) +
         line_chart("Loss against the learning rate", "log10(learning rate)", {loss, smoothed}) +
         "</div>\n</body>\n</html>\n";
}

}  // namespace tp::train
