#include "train/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <variant>

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

// Seconds with three significant digits below 10 s (an epoch of a small run takes 0.042 s, not 0.0).
std::string seconds_text(double seconds) {
  return seconds < 10 ? fmt::format("{:.3g}", seconds) : fmt::format("{:.1f}", seconds);
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

constexpr double kChartWidth = 560, kChartHeight = 300;
constexpr double kLeft = 64, kRight = kChartWidth - 16, kTop = 56, kBottom = kChartHeight - 44;

// The opening of a chart's SVG: its frame and title.
std::string chart_start(const std::string& title) {
  return fmt::format(
      "<svg class=\"chart\" viewBox=\"0 0 {0} {1}\" width=\"{0}\" height=\"{1}\" role=\"img\" "
      "aria-label=\"{2}\">\n"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n"
      "<text x=\"{3}\" y=\"22\" class=\"title\">{2}</text>\n",
      kChartWidth, kChartHeight, escape(title), kLeft);
}

std::string chart_without_values(const std::string& title) {
  return chart_start(title) + fmt::format(
                                  "<text x=\"{}\" y=\"{}\" class=\"empty\" text-anchor=\"middle\">no values "
                                  "yet</text>\n</svg>\n",
                                  (kLeft + kRight) / 2, (kTop + kBottom) / 2);
}

// The plotting area of a chart: value ranges widened to round ticks, and the mapping to SVG coordinates.
struct Axes {
  double x_min, x_max, y_min, y_max;
  double x(double value) const { return kLeft + (value - x_min) / (x_max - x_min) * (kRight - kLeft); }
  double y(double value) const { return kBottom - (value - y_min) / (y_max - y_min) * (kBottom - kTop); }
};

// Grid lines, ticks and their labels, both axes and the x axis' label for values in the given ranges.
// `log_y`: the y values are log10 of what is shown, with a tick at powers of ten.
std::string draw_axes(Axes& axes, const std::string& x_label, bool log_y = false) {
  if (axes.x_max == axes.x_min) {
    axes.x_min -= 1;
    axes.x_max += 1;
  }
  if (axes.y_max == axes.y_min) {
    const double pad = axes.y_min == 0 ? 1.0 : std::abs(axes.y_min) * 0.1;
    axes.y_min -= pad;
    axes.y_max += pad;
  }
  const double y_step = log_y ? std::ceil((axes.y_max - axes.y_min) / 6) : tick_step(axes.y_max - axes.y_min);
  axes.y_min = std::floor(axes.y_min / y_step) * y_step;
  axes.y_max = std::ceil(axes.y_max / y_step) * y_step;
  const double x_step = tick_step(axes.x_max - axes.x_min);
  std::string svg;
  for (double y = axes.y_min; y <= axes.y_max + y_step * 1e-6; y += y_step) {
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/>\n"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"end\">{}</text>\n",
        kLeft, axes.y(y), kRight, axes.y(y), kLeft - 6, axes.y(y) + 4, tick_label(log_y ? std::pow(10.0, y) : y));
  }
  for (double x = std::ceil(axes.x_min / x_step) * x_step; x <= axes.x_max + x_step * 1e-6; x += x_step) {
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" class=\"axis\"/>\n"
        "<text x=\"{0:.1f}\" y=\"{3:.1f}\" class=\"tick\" text-anchor=\"middle\">{4}</text>\n",
        axes.x(x), kBottom, kBottom + 5, kBottom + 18, tick_label(x));
  }
  svg += fmt::format(
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" class=\"axis\"/>\n"
      "<line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{1}\" class=\"axis\"/>\n"
      "<text x=\"{4}\" y=\"{5}\" class=\"label\" text-anchor=\"middle\">{6}</text>\n",
      kLeft, kBottom, kRight, kTop, (kLeft + kRight) / 2, kChartHeight - 8, escape(x_label));
  return svg;
}

// One legend entry at `x` (advanced past it).
std::string legend_entry(double& x, const std::string& name, const std::string& color) {
  std::string svg = fmt::format(
      "<rect x=\"{:.1f}\" y=\"32\" width=\"14\" height=\"4\" fill=\"{}\"/>"
      "<text x=\"{:.1f}\" y=\"38\" class=\"legend\">{}</text>\n",
      x, color, x + 18, escape(name));
  x += 32 + 7.0 * static_cast<double>(name.size());
  return svg;
}

// A loss that falls over decades is flat after its first steps on a linear axis.
enum class YScale { linear, log_when_wide };
constexpr double kWideRatio = 100;  // the largest value over the smallest that turns the axis logarithmic

// An SVG line chart of `series` with axes, grid lines, tick labels and a legend.
std::string line_chart(std::string title, const std::string& x_label, std::vector<Series> series,
                       YScale scale = YScale::linear) {
  series.erase(std::remove_if(series.begin(), series.end(),
                              [](const Series& s) {
                                return std::none_of(s.points.begin(), s.points.end(),
                                                    [](const Point& p) { return std::isfinite(p.y); });
                              }),
               series.end());
  if (series.empty()) return chart_without_values(title);
  Axes axes{INFINITY, -INFINITY, INFINITY, -INFINITY};
  for (auto& s : series) {
    s.points = thin(s.points, 800);
    for (const Point& p : s.points) {
      if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
      axes.x_min = std::min(axes.x_min, p.x);
      axes.x_max = std::max(axes.x_max, p.x);
      axes.y_min = std::min(axes.y_min, p.y);
      axes.y_max = std::max(axes.y_max, p.y);
    }
  }
  const bool log_y = scale == YScale::log_when_wide && axes.y_min > 0 && axes.y_max / axes.y_min >= kWideRatio;
  if (log_y) {
    for (auto& s : series) {
      for (Point& p : s.points) p.y = p.y > 0 ? std::log10(p.y) : NAN;
    }
    axes.y_min = std::floor(std::log10(axes.y_min));
    axes.y_max = std::ceil(std::log10(axes.y_max));
    title += " (log scale)";
  }
  std::string svg = chart_start(title) + draw_axes(axes, x_label, log_y);
  double legend_x = kLeft;
  for (const Series& s : series) {
    svg += legend_entry(legend_x, s.name, s.color);
    std::string path;
    bool pen_down = false;
    for (const Point& p : s.points) {
      if (!std::isfinite(p.y)) {
        pen_down = false;
        continue;
      }
      path += fmt::format("{}{:.1f},{:.1f}", pen_down ? " L" : (path.empty() ? "M" : " M"), axes.x(p.x),
                          axes.y(p.y));
      pen_down = true;
    }
    svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\"/>\n", path, s.color);
    if (s.markers) {
      for (const Point& p : s.points) {
        if (std::isfinite(p.y)) {
          svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", axes.x(p.x),
                             axes.y(p.y), s.color);
        }
      }
    }
  }
  return svg + "</svg>\n";
}

// The parts of a step in the report, in stacking order, with their colours.
struct StepPartStyle {
  StepPart part;
  const char* name;
  const char* legend;  // short enough for the five to fit above the chart
  const char* color;
};
constexpr StepPartStyle kStepPartStyles[] = {
    {StepPart::data_wait, "data wait", "data wait", "#e15759"},
    {StepPart::forward_backward, "forward+backward", "fwd+bwd", "#4e79a7"},
    {StepPart::allreduce, "all-reduce", "all-reduce", "#f28e2b"},
    {StepPart::optimizer, "optimizer", "optimizer", "#59a14f"},
    {StepPart::checkpoint, "checkpoint", "checkpoint", "#b07aa1"},
};

// Where the steps' time went: consecutive steps averaged in up to 60 groups, each a bar of the seconds per
// step stacked by part. Records without timing (written by an older version) are left out.
std::string step_time_chart(const std::vector<StepRecord>& steps) {
  const std::string title = "Time per step";
  std::vector<const StepRecord*> timed;
  for (const StepRecord& s : steps) {
    if (std::isfinite(s.seconds)) timed.push_back(&s);
  }
  if (timed.empty()) return chart_without_values(title);
  struct Group {
    double first, last;
    StepTimes mean;
  };
  const std::size_t count = std::min<std::size_t>(60, timed.size());
  std::vector<Group> groups;
  Axes axes{INFINITY, -INFINITY, 0, 0};
  for (std::size_t g = 0; g < count; ++g) {
    const std::size_t begin = g * timed.size() / count, end = (g + 1) * timed.size() / count;
    Group group{static_cast<double>(timed[begin]->step), static_cast<double>(timed[end - 1]->step), {}};
    for (std::size_t i = begin; i < end; ++i) {
      for (std::size_t part = 0; part < kStepParts; ++part) {
        group.mean.seconds[part] += timed[i]->times.seconds[part] / static_cast<double>(end - begin);
      }
    }
    axes.x_min = std::min(axes.x_min, group.first - 0.5);
    axes.x_max = std::max(axes.x_max, group.last + 0.5);
    axes.y_max = std::max(axes.y_max, group.mean.total());
    groups.push_back(group);
  }
  std::string svg = chart_start(title) + draw_axes(axes, "step (bars: mean seconds per step)");
  double legend_x = kLeft;
  for (const StepPartStyle& style : kStepPartStyles) {
    const bool shown = std::any_of(groups.begin(), groups.end(), [&](const Group& g) { return g.mean[style.part] > 0; });
    if (shown) svg += legend_entry(legend_x, style.legend, style.color);
  }
  for (const Group& g : groups) {
    const double left = axes.x(g.first - 0.5), width = std::max(1.0, axes.x(g.last + 0.5) - left - 1);
    double bottom = 0;
    for (const StepPartStyle& style : kStepPartStyles) {
      const double top = bottom + g.mean[style.part];
      if (g.mean[style.part] > 0) {
        svg += fmt::format(
            "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" "
            "data-part=\"{}\"/>\n",
            left, axes.y(top), width, axes.y(bottom) - axes.y(top), style.color, step_part_name(style.part));
      }
      bottom = top;
    }
  }
  return svg + "</svg>\n";
}

// "data wait 12.0%, forward+backward 70.3%, ..." of the timed steps' total, for the report's text.
std::string step_time_shares(const std::vector<StepRecord>& steps) {
  StepTimes sums;
  double total = 0;
  for (const StepRecord& s : steps) {
    if (!std::isfinite(s.seconds)) continue;
    total += s.seconds;
    for (std::size_t part = 0; part < kStepParts; ++part) sums.seconds[part] += s.times.seconds[part];
  }
  if (total <= 0) return "";
  std::vector<std::string> shares;
  for (const StepPartStyle& style : kStepPartStyles) {
    shares.push_back(fmt::format("{} {:.1f}%", style.name, 100 * sums[style.part] / total));
  }
  return fmt::format("Where the training steps' time went: {}.", fmt::join(shares, ", "));
}

bool any_value(const std::vector<EpochMetrics>& epochs, double EpochMetrics::*metric) {
  return std::any_of(epochs.begin(), epochs.end(),
                     [&](const EpochMetrics& m) { return !std::isnan(m.*metric); });
}

struct MetricColumn {
  std::string name;
  double EpochMetrics::*member;
  std::string color;
  bool own_chart = false;  // an error in the target's units (MAE, MSE), not a fraction: a chart of its own
};

std::vector<MetricColumn> validation_metrics(const std::vector<EpochMetrics>& epochs, std::int64_t top_k) {
  const std::vector<MetricColumn> all = {
      {"accuracy", &EpochMetrics::valid_accuracy, "#2ca02c"},
      {"error rate", &EpochMetrics::error_rate, "#d62728"},
      {fmt::format("top-{} accuracy", top_k), &EpochMetrics::top_k_accuracy, "#9467bd"},
      {"MAE", &EpochMetrics::mae, "#8c564b", true},
      {"MSE", &EpochMetrics::mse, "#e377c2", true}};
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
      {"elapsed", seconds_text(r.value("seconds", 0.0)) + " s"},
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
    html += fmt::format("<td>{}</td></tr>\n", seconds_text(m.seconds));
  }
  return html + "</table>\n";
}

// A scatter plot of (x, y) points with a reference line y = slope * x + intercept across the plot.
std::string scatter_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                          const std::vector<Point>& points, double slope, double intercept) {
  Axes axes{INFINITY, -INFINITY, INFINITY, -INFINITY};
  for (const Point& p : points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
    axes.x_min = std::min(axes.x_min, p.x);
    axes.x_max = std::max(axes.x_max, p.x);
    axes.y_min = std::min(axes.y_min, p.y);
    axes.y_max = std::max(axes.y_max, p.y);
  }
  if (!std::isfinite(axes.x_min)) return chart_without_values(title);
  std::string svg = chart_start(title) + draw_axes(axes, x_label);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" class=\"label\">{}</text>\n", kLeft, kTop - 8, escape(y_label));
  // The reference line, over the x values where it stays within the plotting area.
  double x_from = axes.x_min, x_to = axes.x_max;
  if (slope != 0) {
    const double at_bottom = (axes.y_min - intercept) / slope, at_top = (axes.y_max - intercept) / slope;
    x_from = std::max(x_from, std::min(at_bottom, at_top));
    x_to = std::min(x_to, std::max(at_bottom, at_top));
  } else if (intercept < axes.y_min || intercept > axes.y_max) {
    x_to = x_from - 1;  // outside: no line
  }
  if (x_from <= x_to) {
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#d62728\" stroke-width=\"1\" "
        "stroke-dasharray=\"4 3\"/>\n",
        axes.x(x_from), axes.y(slope * x_from + intercept), axes.x(x_to), axes.y(slope * x_to + intercept));
  }
  for (const Point& p : points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"#1f77b4\" fill-opacity=\"0.6\"/>\n",
                       axes.x(p.x), axes.y(p.y));
  }
  return svg + "</svg>\n";
}

std::string loss_text(double loss) {
  return std::isnan(loss) ? "" : fmt::format("{:.3f}", loss);
}

// The confusion matrix as a table whose cells are shaded by their share of the row (the actual class).
std::string confusion_table(const ClassificationInterpretation& interpretation) {
  const std::vector<std::string>& classes = interpretation.classes;
  std::string html = "<table class=\"confusion\">\n<tr><th class=\"corner\">actual \\ predicted</th>";
  for (const std::string& name : classes) html += fmt::format("<th class=\"predicted\">{}</th>", escape(name));
  html += "</tr>\n";
  for (std::size_t a = 0; a < classes.size(); ++a) {
    html += fmt::format("<tr><th>{}</th>", escape(classes[a]));
    for (std::size_t p = 0; p < classes.size(); ++p) {
      const double share = interpretation.confusion_matrix_normalized.at(a).at(p);
      // From white to the charts' blue (#1f77b4) as the share grows.
      const auto channel = [&](int full) { return static_cast<int>(std::lround(255 - (255 - full) * share)); };
      html += fmt::format(
          "<td style=\"background: rgb({},{},{}); color: {}\" title=\"{} of {} as {}\">{}</td>", channel(0x1f),
          channel(0x77), channel(0xb4), share > 0.5 ? "#fff" : "#222", fmt::format("{:.1f}%", 100 * share),
          escape(classes[a]), escape(classes[p]), interpretation.confusion_matrix.at(a).at(p));
    }
    html += "</tr>\n";
  }
  return html + "</table>\n";
}

std::string per_class_table(const ClassificationInterpretation& interpretation) {
  std::string html =
      "<table class=\"per-class\">\n<tr><th>class</th><th>precision</th><th>recall</th><th>F1</th>"
      "<th>support</th></tr>\n";
  for (const ClassScores& c : interpretation.per_class) {
    html += fmt::format("<tr><th>{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", escape(c.name),
                        metric_cell(c.precision), metric_cell(c.recall), metric_cell(c.f1), c.support);
  }
  return html + "</table>\n";
}

// The pairs the model confuses most, up to `limit`.
std::string most_confused_table(const ClassificationInterpretation& interpretation, std::size_t limit) {
  const std::vector<ConfusedPair>& pairs = interpretation.most_confused;
  if (pairs.empty()) return "<p>No validation sample was misclassified.</p>\n";
  std::string html = "<table class=\"most-confused\">\n<tr><th>actual</th><th>predicted as</th><th>samples</th></tr>\n";
  for (std::size_t i = 0; i < std::min(limit, pairs.size()); ++i) {
    html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n", escape(pairs[i].actual),
                        escape(pairs[i].predicted), pairs[i].count);
  }
  return html + "</table>\n";
}

// The samples with the highest loss: a grid of thumbnails for images, a table otherwise.
std::string top_losses_section(const ClassificationInterpretation& interpretation) {
  const std::vector<TopLoss>& top = interpretation.top_losses;
  if (top.empty()) return "";
  std::string html = fmt::format("<h3>The {} validation samples with the highest loss</h3>\n", top.size());
  const bool images =
      std::any_of(top.begin(), top.end(), [](const TopLoss& t) { return !t.thumbnail.empty(); });
  if (!images) {
    html += "<table class=\"top-losses\">\n<tr><th>sample</th><th>predicted</th><th>actual</th><th>loss</th></tr>\n";
    for (const TopLoss& t : top) {
      html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", escape(t.sample),
                          escape(t.predicted), escape(t.actual), loss_text(t.loss));
    }
    return html + "</table>\n";
  }
  html += "<div class=\"top-losses\">\n";
  for (const TopLoss& t : top) {
    html += fmt::format(
        "<figure><img src=\"{}\" alt=\"{}\"/><figcaption>{} / {}<br/>loss {}<br/><span class=\"file\">{}</span>"
        "</figcaption></figure>\n",
        escape(t.thumbnail), escape(t.sample), escape(t.predicted), escape(t.actual), loss_text(t.loss),
        escape(t.sample));
  }
  return html + "</div>\n<p class=\"note\">Each: predicted / actual class, the loss, and the file.</p>\n";
}

// Predicted against actual and the residuals.
std::string task_section(const RegressionInterpretation& interpretation) {
  std::vector<Point> predicted_actual, residuals;
  for (const RegressedSample& p : interpretation.points) {
    predicted_actual.push_back({p.actual, p.predicted});
    residuals.push_back({p.predicted, p.actual - p.predicted});
  }
  return "<div class=\"charts\">\n" +
         scatter_chart("Predicted against actual", "actual", "predicted", predicted_actual, 1, 0) +
         scatter_chart("Residuals (actual - predicted)", "predicted", "residual", residuals, 0, 0) +
         "</div>\n";
}

// The matrix, the per-class scores, the most confused pairs and the top losses.
std::string task_section(const ClassificationInterpretation& interpretation) {
  return "<div class=\"interpretation\">\n<div>\n<h3>Confusion matrix</h3>\n" +
         confusion_table(interpretation) +
         "<p class=\"note\">Rows: the actual class; shade: the row's share.</p>\n</div>\n" +
         "<div>\n<h3>Per class</h3>\n" + per_class_table(interpretation) + "</div>\n" +
         "<div>\n<h3>Most confused</h3>\n" + most_confused_table(interpretation, 10) + "</div>\n</div>\n" +
         top_losses_section(interpretation);
}

// What the model gets wrong (train/interpretation.h).
std::string interpretation_section(const Interpretation& interpretation) {
  return fmt::format(
             "<h2>What the model gets wrong</h2>\n<p class=\"shares\">The final validation (epoch {}, step "
             "{}), all {} samples of every rank's share.</p>\n",
             interpretation.at.epoch, interpretation.at.step, interpretation.samples) +
         std::visit([](const auto& task) { return task_section(task); }, interpretation.task);
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
.shares { color: #444; font-size: 13px; margin: 8px 0 0 0; }
pre { background: #fff; border: 1px solid #ddd; padding: 12px; font-size: 12px; overflow-x: auto; }
h3 { font-size: 14px; margin: 12px 0 6px 0; }
.interpretation { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
table.confusion td { text-align: right; min-width: 36px; font-variant-numeric: tabular-nums; }
table.confusion th.predicted { font-weight: 600; }
table.per-class td, table.most-confused td:last-child { text-align: right; font-variant-numeric: tabular-nums; }
.note { color: #666; font-size: 12px; margin: 6px 0 0 0; }
div.top-losses { display: flex; flex-wrap: wrap; gap: 10px; }
div.top-losses figure { margin: 0; background: #fff; border: 1px solid #ddd; border-radius: 4px; padding: 6px;
                        width: 140px; font-size: 12px; }
div.top-losses img { width: 128px; height: 128px; object-fit: contain; image-rendering: pixelated;
                     display: block; margin: 0 auto 4px auto; }
div.top-losses .file { color: #555; word-break: break-all; }
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

// run.json's early stop and kept best model, as the status line says them.
std::string tracked_text(const json& record) {
  std::string text;
  if (const auto stop = record.find("early_stop"); stop != record.end()) {
    text += "; " + text_of(stop->value("reason", json()));
  }
  if (const auto best = record.find("best"); best != record.end()) {
    text += fmt::format("; model.pt is epoch {}'s, the best {} ({:.4g})", best->value("epoch", 0),
                        text_of(best->value("metric", json())), best->value("value", 0.0));
  }
  return text;
}

}  // namespace

std::string render_report(const ReportInput& input) {
  const std::string job = text_of(input.record.value("job", json()));
  const std::int64_t done = input.epochs.empty() ? 0 : input.epochs.back().epoch;
  std::string status =
      input.finished
          ? fmt::format("finished: {} epochs in {} s", done, seconds_text(input.record.value("seconds", 0.0)))
          : fmt::format("running: epoch {} of {} done", done, input.total_epochs);
  if (input.finished) status += tracked_text(input.record);

  std::vector<Point> train_loss, lr, valid_loss;
  for (const StepRecord& s : input.steps) {
    train_loss.push_back({static_cast<double>(s.step), s.train_loss});
    lr.push_back({static_cast<double>(s.step), s.lr});
  }
  for (const EpochMetrics& m : input.epochs)
    valid_loss.push_back({static_cast<double>(m.step), m.valid_loss});
  const std::vector<MetricColumn> metrics = validation_metrics(input.epochs, input.top_k);
  std::vector<Series> fractions;  // accuracy and the like, on one axis from 0 to 1
  std::vector<std::pair<std::string, Series>> own_charts;
  for (const auto& column : metrics) {
    Series s{column.name, column.color, {}, true};
    for (const EpochMetrics& m : input.epochs)
      s.points.push_back({static_cast<double>(m.epoch), m.*column.member});
    if (column.own_chart) {
      own_charts.emplace_back("Validation " + column.name, std::move(s));
    } else {
      fractions.push_back(std::move(s));
    }
  }

  std::string html = page_start(job, "trainpoint report", status);
  html += line_chart("Loss", "step",
                     {{"train loss (per step)", "#1f77b4", std::move(train_loss), false},
                      {"valid loss (per epoch)", "#ff7f0e", std::move(valid_loss), true}},
                     YScale::log_when_wide);
  html += line_chart("Learning rate", "step", {{"lr", "#17a2b8", std::move(lr), false}});
  if (!fractions.empty() || own_charts.empty()) html += line_chart("Validation metrics", "epoch", std::move(fractions));
  for (auto& [title, series] : own_charts) {
    html += line_chart(title, "epoch", {std::move(series)}, YScale::log_when_wide);
  }
  html += step_time_chart(input.steps);
  html += "</div>\n";
  const std::string shares = step_time_shares(input.steps);
  if (!shares.empty()) html += fmt::format("<p class=\"shares\">{}</p>\n", escape(shares));
  if (input.interpretation) html += interpretation_section(*input.interpretation);
  html += "<h2>Epochs</h2>\n" + epoch_table(input, metrics);
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
