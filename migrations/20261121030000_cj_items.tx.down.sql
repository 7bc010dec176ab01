DROP TABLE cj_items;
