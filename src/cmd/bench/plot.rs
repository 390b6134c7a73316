//! The bench's SVG plots, drawn with plotters' SVG backend (no fonts needed: text stays text in the SVG): inline
//! tokens per turn in each scenario (one panel per role), tasks solved per mode, and tokens (inline + deref) per
//! solved task per mode, drawn from the first repeat of each run; and for a budget sweep, billed tokens against
//! tasks solved, a point per value and mode over every repeat (the Pareto front of a role's budget).
//!
//! Legibility rules: every legend sits in a strip of its own above the data, never over it; each mode has its own
//! colour, its own dash and its own marker ([`mode_style`]), so modes stay apart in grey print too; value labels
//! are compact and left out where a bar is too narrow to hold one; and a bar chart whose bars are all equal says so
//! in a sentence instead of drawing bars that say nothing.

use less_eval::bench::{Bench, SweepReport};
use less_runtime::WireMode;
use less_runtime::run::RunReport;
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The plots' width.
const WIDTH: u32 = 1080;
/// The title's strip.
const TITLE_H: u32 = 36;
/// The legend's strip, below the title and above every data area.
pub(super) const LEGEND_H: u32 = 36;
/// One role's panel of the tokens-per-turn plot.
const PANEL_H: u32 = 250;
/// Panels side by side.
const COLUMNS: usize = 3;
/// The bar charts' data area.
const BARS_H: u32 = 480;

/// Every plot, as `(file name, SVG text)`.
pub(super) fn plots(bench: &Bench) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for scenario in bench.scenarios() {
        let roles = bench.run(scenario, bench.modes()[0]).map_or(1, |r| r.report.roles.len().max(1));
        let height = TITLE_H + LEGEND_H + PANEL_H * roles.div_ceil(COLUMNS) as u32;
        let svg = draw((WIDTH, height), |area| tokens_per_turn(area, bench, scenario));
        out.push((format!("tokens-per-turn-{scenario}.svg"), svg));
    }
    if bench.runs.iter().any(|r| r.report.tasks.graded > 0) {
        let size = (WIDTH, TITLE_H + LEGEND_H + BARS_H);
        out.push(("tasks-solved.svg".to_owned(), draw(size, |area| tasks_solved(area, bench))));
        out.push(("tokens-per-solved-task.svg".to_owned(), draw(size, |area| tokens_per_solved_task(area, bench))));
    }
    if let Some(sweep) = &bench.sweep {
        let size = (WIDTH, TITLE_H + LEGEND_H + BARS_H);
        out.push(("sweep.svg".to_owned(), draw(size, |area| sweep_front(area, bench.modes().as_slice(), sweep))));
    }
    out
}

/// One point of a sweep's plot: tokens, tasks solved, the value.
type SweepPoint = (f64, f64, u64);

/// A sweep's points: per mode, `(x, solved, value)` in the order swept, x being billed tokens, or the wire tokens
/// (inline + deref) when no model was billed; and which of the two x is.
fn sweep_points(modes: &[WireMode], sweep: &SweepReport) -> (Vec<(WireMode, Vec<SweepPoint>)>, &'static str) {
    let billed = sweep.values.iter().flat_map(|v| &v.modes).any(|t| t.billed > 0);
    let points = modes
        .iter()
        .map(|&mode| {
            let points = sweep
                .values
                .iter()
                .filter_map(|v| {
                    let t = v.modes.iter().find(|t| t.mode == mode)?;
                    let x = if billed { t.billed } else { t.wire };
                    Some((x as f64, f64::from(t.solved), v.value))
                })
                .collect();
            (mode, points)
        })
        .collect();
    (points, if billed { "billed tokens (prompt + completion)" } else { "wire tokens (inline + deref)" })
}

/// Billed tokens against tasks solved, a point per sweep value and mode (labelled with its value), a line per mode
/// in the order swept.
fn sweep_front(area: &Area<'_>, modes: &[WireMode], sweep: &SweepReport) -> Drawn {
    let (per_mode, x_desc) = sweep_points(modes, sweep);
    let title = format!("budget sweep of {}.{}: tokens against tasks solved", sweep.role, sweep.field);
    let data = title_and_legend(area, &title, modes, false)?;
    let all: Vec<SweepPoint> = per_mode.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    let x_max = all.iter().map(|p| p.0).fold(1.0f64, f64::max) * 1.15;
    let y_max = all.iter().map(|p| p.1).fold(1.0f64, f64::max) * 1.2;
    let mut chart = ChartBuilder::on(&data)
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("tasks solved")
        .x_label_formatter(&|x| compact(*x))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .light_line_style(WHITE)
        .draw()?;
    for (mode, points) in &per_mode {
        let line: Vec<(f64, f64)> = points.iter().map(|p| (p.0, p.1)).collect();
        mode_line(&mut chart, &line, mode_style(*mode))?;
        chart.draw_series(points.iter().map(|&(x, y, value)| {
            Text::new(
                format!("{}={value}", sweep.field),
                (x, y),
                ("sans-serif", 11).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Bottom)),
            )
        }))?;
    }
    Ok(())
}

type Drawn = Result<(), Box<dyn std::error::Error>>;
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Draws into an SVG string; a drawing error leaves a note in the SVG instead of failing the bench.
fn draw(size: (u32, u32), f: impl FnOnce(&Area<'_>) -> Drawn) -> String {
    let mut svg = String::new();
    let mut error = None;
    {
        let area = SVGBackend::with_string(&mut svg, size).into_drawing_area();
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

/// How a mode is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ModeStyle {
    pub(super) color: (u8, u8, u8),
    /// Dash and gap in pixels; none: a solid line.
    pub(super) dash: Option<(i32, i32)>,
    pub(super) marker: Marker,
}

/// The marker on each point of a mode's line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Marker {
    Circle,
    Cross,
    Triangle,
}

/// Each mode's own colour, dash and marker: LESS solid blue with circles, verbatim dashed red with crosses,
/// verbatim-whole dotted dark grey with triangles.
pub(super) fn mode_style(mode: WireMode) -> ModeStyle {
    match mode {
        WireMode::Less => ModeStyle { color: (0x1f, 0x77, 0xb4), dash: None, marker: Marker::Circle },
        WireMode::Verbatim => ModeStyle { color: (0xd6, 0x27, 0x28), dash: Some((10, 5)), marker: Marker::Cross },
        WireMode::VerbatimWhole => {
            ModeStyle { color: (0x4d, 0x4d, 0x4d), dash: Some((2, 4)), marker: Marker::Triangle }
        }
    }
}

impl ModeStyle {
    fn rgb(self) -> RGBColor {
        RGBColor(self.color.0, self.color.1, self.color.2)
    }
}

/// The plot's title in its strip, then the legend's strip; gives the area left for the data.
fn title_and_legend<'a>(
    area: &Area<'a>,
    title: &str,
    modes: &[WireMode],
    bars: bool,
) -> Result<Area<'a>, Box<dyn std::error::Error>> {
    let (title_area, rest) = area.split_vertically(TITLE_H);
    title_area.draw(&Text::new(
        title.to_owned(),
        (WIDTH as i32 / 2, TITLE_H as i32 / 2 + 2),
        ("sans-serif", 20).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Center)),
    ))?;
    let (legend, data) = rest.split_vertically(LEGEND_H);
    let y = LEGEND_H as i32 / 2;
    let mut x = 24;
    for mode in modes {
        let style = mode_style(*mode);
        let color = style.rgb();
        if bars {
            legend.draw(&Rectangle::new([(x, y - 7), (x + 22, y + 7)], color.filled()))?;
        } else {
            let line = vec![(x, y), (x + 40, y)];
            match style.dash {
                None => legend.draw(&PathElement::new(line, color.stroke_width(2)))?,
                Some((on, off)) => {
                    legend.draw(&plotters::element::DashedPathElement::new(line, on, off, color.stroke_width(2)))?
                }
            }
            draw_marker(&legend, (x + 20, y), style)?;
        }
        let label = mode.as_str();
        let sample = if bars { 22 } else { 40 };
        legend.draw(&Text::new(
            label.to_owned(),
            (x + sample + 8, y),
            ("sans-serif", 14).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
        x += sample + 8 + text_width(label, 14) + 32;
    }
    Ok(data)
}

/// A marker drawn in pixel coordinates.
fn draw_marker(area: &Area<'_>, at: (i32, i32), style: ModeStyle) -> Drawn {
    let color = style.rgb();
    match style.marker {
        Marker::Circle => area.draw(&Circle::new(at, 4, color.filled()))?,
        Marker::Cross => area.draw(&Cross::new(at, 4, color.stroke_width(2)))?,
        Marker::Triangle => area.draw(&TriangleMarker::new(at, 5, color.filled()))?,
    }
    Ok(())
}

/// About how wide `text` is in a sans-serif font of `size` pixels.
fn text_width(text: &str, size: u32) -> i32 {
    (text.chars().count() as f64 * f64::from(size) * 0.58).ceil() as i32
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// One mode's line through `points`, in its dash, with its markers.
fn mode_line(chart: &mut Chart<'_, '_>, points: &[(f64, f64)], style: ModeStyle) -> Drawn {
    let color = style.rgb();
    let stroke = color.stroke_width(2);
    match style.dash {
        None => chart.draw_series(LineSeries::new(points.iter().copied(), stroke))?,
        Some((on, off)) => chart.draw_series(DashedLineSeries::new(points.iter().copied(), on, off, stroke))?,
    };
    match style.marker {
        Marker::Circle => chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))?,
        Marker::Cross => chart.draw_series(points.iter().map(|&p| Cross::new(p, 4, color.stroke_width(2))))?,
        Marker::Triangle => chart.draw_series(points.iter().map(|&p| TriangleMarker::new(p, 5, color.filled())))?,
    };
    Ok(())
}

/// Inline tokens per turn, one panel per role (each on its own scale), a line per mode.
fn tokens_per_turn(area: &Area<'_>, bench: &Bench, scenario: &str) -> Drawn {
    let modes = bench.modes();
    let runs: Vec<_> = modes.iter().filter_map(|m| bench.run(scenario, *m)).collect();
    let roles: Vec<&String> = runs.first().map(|r| r.report.roles.keys().collect()).unwrap_or_default();
    let title = format!("{scenario}: inline tokens per turn, per role");
    let data = title_and_legend(area, &title, &modes, false)?;
    let rows = roles.len().div_ceil(COLUMNS).max(1);
    let panels = data.split_evenly((rows, COLUMNS));
    for (role, panel) in roles.iter().zip(panels.iter()) {
        let per_mode: Vec<(WireMode, &Vec<u32>)> =
            runs.iter().filter_map(|r| r.report.roles.get(*role).map(|x| (r.report.mode, &x.per_turn))).collect();
        let turns = per_mode.iter().map(|(_, t)| t.len()).max().unwrap_or(0).max(1);
        let most = per_mode.iter().flat_map(|(_, t)| t.iter()).max().copied().unwrap_or(1);
        let mut chart = ChartBuilder::on(panel)
            .caption(role.as_str(), ("sans-serif", 15))
            .margin(8)
            .x_label_area_size(34)
            .y_label_area_size(52)
            .build_cartesian_2d(0.5f64..(turns as f64 + 0.5), 0f64..(f64::from(most) * 1.12).max(1.0))?;
        chart
            .configure_mesh()
            .x_desc("turn")
            .y_desc("tokens")
            .x_labels(turns.min(10) + 1)
            .x_label_formatter(&|x| if (x - x.round()).abs() < 1e-6 { format!("{x:.0}") } else { String::new() })
            .y_labels(5)
            .y_label_formatter(&|y| compact(*y))
            .label_style(("sans-serif", 11))
            .axis_desc_style(("sans-serif", 12))
            .light_line_style(WHITE)
            .draw()?;
        for (mode, per_turn) in &per_mode {
            if per_turn.is_empty() {
                continue;
            }
            let points: Vec<(f64, f64)> =
                per_turn.iter().enumerate().map(|(i, n)| (i as f64 + 1.0, f64::from(*n))).collect();
            mode_line(&mut chart, &points, mode_style(*mode))?;
        }
    }
    Ok(())
}

/// `value` as a short label: `950`, `12.3k`, `1.2M`.
fn compact(value: f64) -> String {
    match value.abs() {
        v if v >= 1e6 => format!("{:.1}M", value / 1e6),
        v if v >= 1e4 => format!("{:.1}k", value / 1e3),
        _ => format!("{value:.0}"),
    }
}

/// Bars per scenario, one per mode, from `value` (none: no bar). When every scenario's bars are equal across the
/// modes, a sentence says so (with the values) instead.
fn grouped_bars(
    area: &Area<'_>,
    bench: &Bench,
    caption: &str,
    y_desc: &str,
    value: impl Fn(&RunReport) -> Option<f64>,
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
    let all_equal = modes.len() > 1
        && values.iter().all(|row| {
            let present: Vec<f64> = row.iter().flatten().copied().collect();
            present.len() == modes.len() && present.windows(2).all(|w| (w[0] - w[1]).abs() < 1e-9)
        });
    if all_equal {
        return equal_bars_note(area, caption, &modes, &scenarios, &values);
    }
    let data = title_and_legend(area, caption, &modes, true)?;
    let y_max = values.iter().flatten().flatten().fold(1.0f64, |a, b| a.max(*b)) * 1.15;
    let n = scenarios.len().max(1);
    let (y_label_area, x_label_area) = (64, 40);
    let slot = (WIDTH as i32 - y_label_area - 24) / n as i32;
    let font = if scenarios.iter().all(|s| text_width(s, 13) < slot - 8) { 13 } else { 11 };
    let mut chart = ChartBuilder::on(&data)
        .margin(12)
        .x_label_area_size(x_label_area)
        .y_label_area_size(y_label_area)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..y_max)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(WHITE)
        .x_labels(n)
        .x_label_style(("sans-serif", font))
        .x_label_formatter(&|x| {
            let idx = x.round();
            if (x - idx).abs() < 1e-6 && idx >= 0.0 {
                let name = scenarios.get(idx as usize).copied().unwrap_or("");
                fit(name, font, slot - 8)
            } else {
                String::new()
            }
        })
        .y_desc(y_desc)
        .y_label_formatter(&|y| compact(*y))
        .draw()?;
    let width = 0.8 / modes.len() as f64;
    let bar_px = f64::from(slot) * width * 0.9;
    for (m_idx, mode) in modes.iter().enumerate() {
        let color = mode_style(*mode).rgb();
        let bars = values.iter().enumerate().filter_map(|(s_idx, row)| {
            let v = row[m_idx]?;
            let x0 = s_idx as f64 - 0.4 + width * m_idx as f64;
            Some(Rectangle::new([(x0, 0.0), (x0 + width * 0.9, v)], color.filled()))
        });
        chart.draw_series(bars)?;
        // A label only where the bar is wide enough to hold it, so neighbouring labels never run together.
        let labels = values.iter().enumerate().filter_map(|(s_idx, row)| {
            let v = row[m_idx]?;
            let text = compact(v);
            if f64::from(text_width(&text, 11)) > bar_px + 4.0 {
                return None;
            }
            let x = s_idx as f64 - 0.4 + width * (m_idx as f64 + 0.45);
            Some(Text::new(
                text,
                (x, v),
                ("sans-serif", 11).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Bottom)),
            ))
        });
        chart.draw_series(labels)?;
    }
    Ok(())
}

/// `text` cut to about `px` pixels in a font of `size` (an ellipsis marks the cut).
fn fit(text: &str, size: u32, px: i32) -> String {
    if text_width(text, size) <= px {
        return text.to_owned();
    }
    let keep = (f64::from(px) / (f64::from(size) * 0.58)).floor() as usize;
    let cut: String = text.chars().take(keep.saturating_sub(1)).collect();
    format!("{cut}…")
}

/// What a bar chart of equal bars says, in words: every mode had the same value in each scenario, and the values.
fn equal_bars_note(
    area: &Area<'_>,
    caption: &str,
    modes: &[WireMode],
    scenarios: &[&str],
    values: &[Vec<Option<f64>>],
) -> Drawn {
    let names: Vec<&str> = modes.iter().map(|m| m.as_str()).collect();
    let mut lines = vec![
        format!("Every mode ({}) has the same value in each scenario,", names.join(", ")),
        "so no bars are drawn: they would all be equal.".to_owned(),
        String::new(),
    ];
    for (scenario, row) in scenarios.iter().zip(values) {
        let value = row.iter().flatten().next().copied().unwrap_or(0.0);
        lines.push(format!("{scenario}: {}", compact(value)));
    }
    let (title_area, rest) = area.split_vertically(TITLE_H);
    title_area.draw(&Text::new(
        caption.to_owned(),
        (WIDTH as i32 / 2, TITLE_H as i32 / 2 + 2),
        ("sans-serif", 20).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Center)),
    ))?;
    for (i, line) in lines.iter().enumerate() {
        rest.draw(&Text::new(line.clone(), (48, 40 + 24 * i as i32), ("sans-serif", 16).into_font()))?;
    }
    Ok(())
}

fn tasks_solved(area: &Area<'_>, bench: &Bench) -> Drawn {
    grouped_bars(area, bench, "graded tasks solved, per mode", "tasks solved", |r| {
        (r.tasks.graded > 0).then_some(f64::from(r.tasks.solved))
    })
}

fn tokens_per_solved_task(area: &Area<'_>, bench: &Bench) -> Drawn {
    grouped_bars(area, bench, "tokens (inline + deref) per solved task", "tokens", |r| {
        let spent = (r.totals.inline_tokens.total + r.totals.deref_tokens) as f64;
        (r.tasks.solved > 0).then(|| spent / f64::from(r.tasks.solved))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use less_eval::bench::BenchRun;
    use serde_json::json;

    /// A run of scenario `s` in `mode`: two roles with the given turns, `solved` of 2 graded tasks, `spent` tokens.
    fn run(mode: &str, lead: &[u32], dev: &[u32], solved: u32, spent: u64) -> BenchRun {
        let stats = |total: u64| json!({"mean": 0.0, "p50": 0, "p95": 0, "max": 0, "total": total});
        let role = |turns: &[u32]| json!({"per_turn": turns, "inline_tokens": stats(turns.iter().map(|n| u64::from(*n)).sum())});
        let items: Vec<_> = (0..2)
            .map(|i| {
                json!({"id": format!("t{i}"), "kind": "locate_rule", "agent": "dev", "role": "dev",
                            "solved": i < solved, "answer": null, "evidence": ""})
            })
            .collect();
        let report: RunReport = serde_json::from_value(json!({
            "scenario": "s", "mode": mode, "tokenizer": "o200k_base", "checks": [], "over_cap": [],
            "roles": {"lead": role(lead), "dev": role(dev)},
            "tasks": {"graded": 2, "solved": solved, "items": items},
            "totals": {"inline_tokens": stats(spent), "deref_tokens": 0},
        }))
        .expect("a report");
        BenchRun {
            report,
            repeat: 1,
            depth: 2,
            agents: 2,
            task_kinds: Default::default(),
            lead: "lead".into(),
            sweep: None,
        }
    }

    fn bench(solved: [u32; 3]) -> Bench {
        Bench {
            runs: vec![
                run("less", &[120, 140], &[300], solved[0], 560),
                run("verbatim", &[900, 1400], &[2100], solved[1], 4400),
                run("verbatim-whole", &[2000, 3100], &[5200], solved[2], 10300),
            ],
            ..Bench::default()
        }
    }

    fn hex((r, g, b): (u8, u8, u8)) -> String {
        format!("#{r:02X}{g:02X}{b:02X}")
    }

    /// The y of every `<text>` whose content is `label`.
    fn text_ys(svg: &str, label: &str) -> Vec<f64> {
        svg.split("<text")
            .skip(1)
            .filter(|t| t.split_once('>').is_some_and(|(_, rest)| rest.split('<').next().map(str::trim) == Some(label)))
            .filter_map(|t| t.split("y=\"").nth(1)?.split('"').next()?.parse().ok())
            .collect()
    }

    /// Each mode has its own colour, dash and marker, and each colour is drawn; the legend sits in its strip above
    /// every panel, apart from the data.
    #[test]
    fn modes_are_told_apart_and_the_legend_sits_outside_the_data() {
        let styles: Vec<ModeStyle> =
            [WireMode::Less, WireMode::Verbatim, WireMode::VerbatimWhole].into_iter().map(mode_style).collect();
        for (i, a) in styles.iter().enumerate() {
            for b in &styles[i + 1..] {
                assert!(a.color != b.color && a.dash != b.dash && a.marker != b.marker, "{a:?} vs {b:?}");
            }
        }
        let plots = plots(&bench([2, 1, 0]));
        let (_, svg) = plots.iter().find(|(name, _)| name == "tokens-per-turn-s.svg").expect("the plot");
        for style in &styles {
            assert!(svg.contains(&format!("stroke=\"{}\"", hex(style.color))), "{}", hex(style.color));
        }
        let data_top = f64::from(TITLE_H + LEGEND_H);
        for mode in ["less", "verbatim", "verbatim-whole"] {
            let ys = text_ys(svg, mode);
            assert_eq!(ys.len(), 1, "{mode} is named once, in the legend");
            assert!(ys[0] > f64::from(TITLE_H) && ys[0] < data_top, "{mode}'s legend at y {} is in its strip", ys[0]);
        }
        // The panels (one per role) start below the legend.
        for role in ["lead", "dev"] {
            let ys = text_ys(svg, role);
            assert!(!ys.is_empty() && ys.iter().all(|y| *y > data_top), "{role}: {ys:?}");
        }
        let (_, bars) = plots.iter().find(|(name, _)| name == "tasks-solved.svg").expect("the bars");
        for mode in ["less", "verbatim", "verbatim-whole"] {
            assert!(text_ys(bars, mode).iter().all(|y| *y < data_top), "{mode}'s legend is above the bars");
        }
    }

    /// A bar chart whose bars would all be equal says so instead; one whose bars differ draws them.
    #[test]
    fn equal_bars_are_said_not_drawn() {
        let plots = plots(&bench([2, 2, 2]));
        let (_, equal) = plots.iter().find(|(name, _)| name == "tasks-solved.svg").expect("the plot");
        assert!(equal.contains("Every mode (less, verbatim, verbatim-whole) has the same value"), "{equal}");
        assert!(equal.contains("s: 2"), "{equal}");
        assert!(!equal.contains(&format!("fill=\"{}\"", hex((0xd6, 0x27, 0x28)))), "no bars: {equal}");
        let (_, differ) = plots.iter().find(|(name, _)| name == "tokens-per-solved-task.svg").expect("the plot");
        assert!(!differ.contains("Every mode"), "tokens per solved task differ");
        assert!(differ.contains(&format!("fill=\"{}\"", hex((0xd6, 0x27, 0x28)))), "verbatim's bar is drawn");
        assert_eq!(compact(12_345.0), "12.3k");
        assert_eq!(fit("uc4-shared-knowledge", 13, 60), "uc4-sh…");
        assert_eq!(fit("uc1", 13, 60), "uc1");
    }
}
