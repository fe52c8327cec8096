"""tools/int8_quantize_profile.py's arithmetic (its timing needs a GPU): the least bytes a quantizer of a
problem moves, and the table that splits its time by launch."""

from tool_module import load_tool

tool = load_tool("int8_quantize_profile")


def test_the_least_bytes_read_each_input_once_and_write_each_code_once():
    gqa = tool.Problem("p", batch=2, heads=4, kv_heads=2, seq_len=3, kv_seq_len=5, head_dim=64)
    q, kv = 2 * 4 * 3 * 64, 2 * (2 * 2 * 5 * 64)
    assert gqa.least_bytes() == (q + kv) * (2 + 1)


def test_the_table_gives_each_launch_its_share_and_the_whole_rate():
    problem = tool.Problem("vit", 1, 1, 1, 1000, 1000, 64)  # 192000 elements: 576000 least bytes
    rows = tool.kernel_table(problem, {"int8_stats_kernel": 3.0, "int8_kv_kernel": 1.0})
    assert rows[0] == "| vit | int8_stats_kernel | 3.0 | 75% |"
    assert rows[1] == "| vit | int8_kv_kernel | 1.0 | 25% |"
    assert rows[2] == "| vit | **all launches** | 4.0 | 0.14 TB/s of its least bytes |"
