//! The sweep chart (feature `chart`): messages and time against N on
//! log-log axes, each measured curve beside its textbook formula (dashed),
//! as an SVG file. The colours are the caller's, so every chart of a tool
//! looks alike.

use plotters::prelude::*;

use crate::formula::formula;
use crate::run::{Algorithm, Report};

/// What drawing the chart can fail with (the file, the drawing).
pub type ChartError = Box<dyn std::error::Error + Send + Sync>;

/// Draws `reports` (a sweep over N) into `file`, a series per algorithm
/// in `colors`, cycled.
pub fn sweep(
    file: &std::path::Path,
    reports: &[Report],
    colors: &[RGBColor],
) -> Result<(), ChartError> {
    let root = SVGBackend::new(file, (1100, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(550);
    let max_n = reports.iter().map(|r| r.nodes).max().unwrap_or(4) as f64;
    let mut algorithms: Vec<Algorithm> = reports.iter().map(|r| r.algorithm).collect();
    algorithms.dedup();
    algorithms.sort_by_key(|a| Algorithm::ALL.iter().position(|x| x == a));
    algorithms.dedup();
    let panels: [(&DrawingArea<SVGBackend, plotters::coord::Shift>, &str, bool); 2] =
        [(&left, "messages", true), (&right, "time units", false)];
    for (area, title, messages) in panels {
        let value = |r: &Report| if messages { r.messages } else { r.time_units };
        let ymax = reports.iter().map(value).fold(1.0, f64::max) * 2.0;
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{title} against N"), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d((2f64..max_n * 1.5).log_scale(), (0.5f64..ymax).log_scale())?;
        chart.configure_mesh().x_desc("N").draw()?;
        for (i, &algorithm) in algorithms.iter().enumerate() {
            let color = colors[i % colors.len()];
            let points: Vec<(f64, f64)> = reports
                .iter()
                .filter(|r| r.algorithm == algorithm)
                .map(|r| (r.nodes as f64, value(r).max(0.5)))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
                .label(algorithm.name())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
            if messages {
                let case = reports[0].case;
                let formula: Vec<(f64, f64)> = points
                    .iter()
                    .filter_map(|&(n, _)| Some((n, formula(algorithm, case, n)?.max(0.5))))
                    .collect();
                // Dashes: short segments between neighbouring points.
                for pair in formula.windows(2) {
                    let (a, b) = (pair[0], pair[1]);
                    for k in 0..6 {
                        let t0 = k as f64 / 6.0;
                        let t1 = t0 + 0.5 / 6.0;
                        let at = |t: f64| {
                            (
                                (a.0.ln() + t * (b.0.ln() - a.0.ln())).exp(),
                                (a.1.ln() + t * (b.1.ln() - a.1.ln())).exp(),
                            )
                        };
                        chart.draw_series(LineSeries::new(
                            [at(t0), at(t1)],
                            color.mix(0.6).stroke_width(1),
                        ))?;
                    }
                }
            }
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
