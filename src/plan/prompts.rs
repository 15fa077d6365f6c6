//! The built-in prompts a workload may name (`prompt = "builtin:code"`): each
//! an instruction that the load generator pads to the cell's context target.

pub const BUILTIN_PROMPTS: &[&str] = &["code", "reasoning", "document"];

/// The instruction of a built-in prompt.
pub fn builtin_prompt(name: &str) -> Option<&'static str> {
    Some(match name {
        "code" => "Write a Python function `fibonacci(n)` that returns the n-th Fibonacci number using an iterative approach, then explain its time and memory complexity and give three unit tests.",
        "reasoning" => "A train leaves at 09:40 and travels 312 km at an average of 96 km/h, with a 12 minute stop halfway. Another leaves the same station at 10:05 at 120 km/h without stopping. Reason step by step: which arrives first, and by how many minutes?",
        "document" => "Summarise the document above in five bullet points, then list every number it mentions with what it refers to.",
        _ => return None,
    })
}
