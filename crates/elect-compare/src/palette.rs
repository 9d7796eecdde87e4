//! The series colours of every chart elect draws (`compare --report`,
//! `simulate --plot`), so the two tools look alike.

use plotters::style::RGBColor;

/// The series colours of every chart elect draws.
pub const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];
