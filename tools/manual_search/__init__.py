"""The manual search tool: fault codes and symptoms against the plant's indexed PDF manuals."""

from tools.manual_search.tool import ManualSearchInput, ManualSearchTool

__all__ = ["ManualSearchInput", "ManualSearchTool"]
