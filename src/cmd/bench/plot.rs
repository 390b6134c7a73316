//! The bench's SVG plots, drawn with plotters' SVG backend (no fonts needed: text stays text in the SVG):
//! inline tokens per turn per role in each scenario (LESS solid, baselines dashed), tasks solved per mode, and tokens
//! (inline + deref) per solved task per mode. Drawn from the first repeat of each run.

use less_eval::bench::Bench;
use less_runtime::WireMode;
use plotters::coord::Shift;
use plotters::prelude::*;

const SIZE: (u32, u32) = (960, 540);

/// Every plot, as `(file name, SVG text)`.
pub(super) fn plots(bench: &Bench) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for scenario in bench.scenarios() {
        let svg = draw(|area| tokens_per_turn(area, bench, scenario));
        out.push((format!("tokens-per-turn-{scenario}.svg"), svg));
    }
    if bench.runs.iter().any(|r| r.report.tasks.graded > 0) {
        out.push(("tasks-solved.svg".to_owned(), draw(|area| tasks_solved(area, bench))));
        out.push(("tokens-per-solved-task.svg".to_owned(), draw(|area| tokens_per_solved_task(area, bench))));
    }
    out
}

type Drawn = Result<(), Box<dyn std::error::Error>>;

/// Draws into an SVG string; a drawing error leaves a note in the SVG instead of failing the bench.
fn draw(f: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Drawn) -> String {
    let mut svg = String::new();
    let mut error = None;
    {
        let area = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let drawn = area.fill(&WHITE).map_err(Into::into).and_then(|()| f(&area));
        if let Err(err) = drawn.and_then(|()| area.present().map_err(Into::into)) {
            error = Some(err.to_string());
        }
    }
    match error {
        Some(err) => format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"20\">plot failed: {err}</text></svg>\n"
        ),
        None => svg,
    }
}

fn mode_color(mode: WireMode) -> RGBColor {
    match mode {
        WireMode::Less => RGBColor(0x1f, 0x77, 0xb4),
        WireMode::Verbatim => RGBColor(0xd6, 0x27, 0x28),
        WireMode::VerbatimWhole => RGBColor(0x7f, 0x7f, 0x7f),
    }
}

fn tokens_per_turn(area: &DrawingArea<SVGBackend<'_>, Shift>, bench: &Bench, scenario: &str) -> Drawn {
    let modes = bench.modes();
    let runs: Vec<_> = modes.iter().filter_map(|m| bench.run(scenario, *m)).collect();
    let roles: Vec<&String> = runs.first().map(|r| r.report.roles.keys().collect()).unwrap_or_default();
    let max_turns = runs.iter().flat_map(|r| r.report.roles.values().map(|x| x.per_turn.len())).max().unwrap_or(1);
    let max_tokens = runs.iter().flat_map(|r| r.report.roles.values().flat_map(|x| x.per_turn.iter())).max();
    let y_max = f64::from(*max_tokens.unwrap_or(&1)) * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{scenario}: inline tokens per turn, per role"), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0.5f64..(max_turns as f64 + 0.5), 0f64..y_max.max(1.0))?;
    chart
        .configure_mesh()
        .x_desc("turn of the role")
        .y_desc("tokens")
        .x_labels(max_turns.min(20))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    for (r_idx, role) in roles.iter().enumerate() {
        let color = Palette99::pick(r_idx).to_rgba();
        for run in &runs {
            let Some(report) = run.report.roles.get(*role) else { continue };
            if report.per_turn.is_empty() {
                continue;
            }
            let points: Vec<(f64, f64)> =
                report.per_turn.iter().enumerate().map(|(i, n)| (i as f64 + 1.0, f64::from(*n))).collect();
            let style = color.stroke_width(2);
            let label = format!("{role} ({})", run.report.mode);
            if run.report.mode == WireMode::Less {
                chart
                    .draw_series(LineSeries::new(points.clone(), style).point_size(3))?
                    .label(label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
            } else {
                chart
                    .draw_series(DashedLineSeries::new(points.clone(), 6, 4, style))?
                    .label(label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 8, y)], color.stroke_width(2)));
                chart.draw_series(points.iter().map(|&p| Cross::new(p, 3, color.stroke_width(1))))?;
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 12))
        .draw()?;
    Ok(())
}

/// Bars per scenario, one per mode, from `value` (none: no bar).
fn grouped_bars(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    bench: &Bench,
    caption: &str,
    y_desc: &str,
    value: impl Fn(&less_runtime::run::RunReport) -> Option<f64>,
) -> Drawn {
    let modes = bench.modes();
    let scenarios: Vec<&str> = bench
        .scenarios()
        .into_iter()
        .filter(|s| modes.iter().any(|m| bench.run(s, *m).is_some_and(|r| r.report.tasks.graded > 0)))
        .collect();
    let values: Vec<Vec<Option<f64>>> = scenarios
        .iter()
        .map(|s| modes.iter().map(|m| bench.run(s, *m).and_then(|r| value(&r.report))).collect())
        .collect();
    let y_max = values.iter().flatten().flatten().fold(1.0f64, |a, b| a.max(*b)) * 1.15;
    let n = scenarios.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..y_max)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let idx = x.round();
            if (x - idx).abs() < 1e-6 && idx >= 0.0 {
                scenarios.get(idx as usize).copied().unwrap_or("").to_owned()
            } else {
                String::new()
            }
        })
        .y_desc(y_desc)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    let width = 0.8 / modes.len() as f64;
    for (m_idx, mode) in modes.iter().enumerate() {
        let color = mode_color(*mode);
        let bars = values.iter().enumerate().filter_map(|(s_idx, row)| {
            let v = row[m_idx]?;
            let x0 = s_idx as f64 - 0.4 + width * m_idx as f64;
            Some(Rectangle::new([(x0, 0.0), (x0 + width * 0.9, v)], color.filled()))
        });
        chart
            .draw_series(bars)?
            .label(mode.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        let labels = values.iter().enumerate().filter_map(|(s_idx, row)| {
            let v = row[m_idx]?;
            let x = s_idx as f64 - 0.4 + width * (m_idx as f64 + 0.45);
            Some(Text::new(
                format!("{v:.0}"),
                (x, v),
                ("sans-serif", 11).into_font().color(&BLACK).pos(plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Center,
                    plotters::style::text_anchor::VPos::Bottom,
                )),
            ))
        });
        chart.draw_series(labels)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()?;
    Ok(())
}

fn tasks_solved(area: &DrawingArea<SVGBackend<'_>, Shift>, bench: &Bench) -> Drawn {
    grouped_bars(area, bench, "graded tasks solved, per mode", "tasks solved", |r| {
        (r.tasks.graded > 0).then_some(f64::from(r.tasks.solved))
    })
}

fn tokens_per_solved_task(area: &DrawingArea<SVGBackend<'_>, Shift>, bench: &Bench) -> Drawn {
    grouped_bars(area, bench, "tokens (inline + deref) per solved task", "tokens", |r| {
        let spent = (r.totals.inline_tokens.total + r.totals.deref_tokens) as f64;
        (r.tasks.solved > 0).then(|| spent / f64::from(r.tasks.solved))
    })
}
